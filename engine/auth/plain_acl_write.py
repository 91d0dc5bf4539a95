"""Changing 4.9's ACL 1.0 files as 4.9.7's `PlainPermissionManager` does (admin codes 50, 51, 53).

An account is updated in the file that defines it, or added to ``conf/plain_acl.yml``; a
deletion removes it from its file; global white addresses go to the default file or the
given one (which must be a .yml/.yaml under ROCKETMQ_HOME).  Every write bumps the file's
``dataVersion`` (counter + 1, timestamp now) and replaces the file atomically (mode 0600:
it holds secret keys).  Input is checked first (key lengths, perms, address patterns), so a
refused change leaves the file as it was.
"""

from __future__ import annotations

import os
import time
from typing import Any

import yaml

from engine.auth.addresses import compile_white
from engine.auth.errors import AuthInputError
from engine.auth.files import write_private
from engine.auth.plain_acl import (
    check_named_perms,
    convert,
    default_file,
    find_files,
    read_yaml,
)
from engine.protocol.body.auth import PlainAccessConfig


def _owner(home: str, access_key: str) -> str | None:
    for path in find_files(home):
        for item in read_yaml(path).get("accounts") or []:
            if isinstance(item, dict) and str(item.get("accessKey")) == access_key:
                return path
    return None


def _write(path: str, data: dict[str, Any]) -> None:
    versions = data.get("dataVersion")
    first = versions[0] if isinstance(versions, list) and versions else {}
    counter = int(first.get("counter", 0)) if isinstance(first, dict) else 0
    data["dataVersion"] = [{"counter": counter + 1, "timestamp": int(time.time() * 1000)}]
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    write_private(path, text.encode("utf-8"))


def _account_doc(account: PlainAccessConfig) -> dict[str, Any]:
    doc: dict[str, Any] = {"accessKey": account.access_key, "secretKey": account.secret_key}
    if account.white_remote_address is not None:
        doc["whiteRemoteAddress"] = account.white_remote_address
    doc["admin"] = account.admin
    for key, value in (("defaultTopicPerm", account.default_topic_perm),
                       ("defaultGroupPerm", account.default_group_perm),
                       ("topicPerms", account.topic_perms), ("groupPerms", account.group_perms)):
        if value:
            doc[key] = value
    return doc


def update_account(home: str, account: PlainAccessConfig) -> str:
    """Create or replace an account; returns the file written.

    Raises:
        AuthInputError: the account would not load (short keys, bad perm or address).
        AuthFileError: the file holding it does not parse.
    """
    convert(account)
    who = f"account {account.access_key!r}"
    check_named_perms(account.topic_perms, who)
    check_named_perms(account.group_perms, who)
    key = account.access_key or ""
    path = _owner(home, key) or default_file(home)
    data = read_yaml(path) if os.path.exists(path) else {}
    accounts = [a for a in data.get("accounts") or []
                if not (isinstance(a, dict) and str(a.get("accessKey")) == key)]
    accounts.append(_account_doc(account))
    data["accounts"] = accounts
    _write(path, data)
    return path


def delete_account(home: str, access_key: str) -> str:
    """Remove an account from its file; returns the file written.

    Raises:
        AuthInputError: no file defines it.
    """
    path = _owner(home, access_key)
    if path is None:
        raise AuthInputError(f"no ACL file under {home}/conf defines accessKey {access_key!r}")
    data = read_yaml(path)
    data["accounts"] = [a for a in data.get("accounts") or []
                        if not (isinstance(a, dict) and str(a.get("accessKey")) == access_key)]
    _write(path, data)
    return path


def update_global_whites(home: str, addrs: list[str], path: str | None = None) -> str:
    """Replace a file's globalWhiteRemoteAddresses; returns the file written.

    Raises:
        AuthInputError: a bad pattern, or a file outside ROCKETMQ_HOME / not .yml.
    """
    for addr in addrs:
        compile_white(addr)
    target = os.path.abspath(path) if path else default_file(home)
    if not target.startswith(os.path.abspath(home) + os.sep):
        raise AuthInputError(f"{target} is not under ROCKETMQ_HOME {home}")
    if not target.endswith((".yml", ".yaml")):
        raise AuthInputError(f"{target} is not an ACL file (.yml or .yaml)")
    if path and not os.path.isfile(target):
        raise AuthInputError(f"{target} does not exist")
    data = read_yaml(target) if os.path.exists(target) else {}
    data["globalWhiteRemoteAddresses"] = list(addrs)
    _write(target, data)
    return target

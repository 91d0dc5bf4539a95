"""Access control of the dev cluster: generated keys, the config lines, the demo app's rules.

How this works: `dev up` (unless ``--open``) generates three keys once and keeps them in
``<data dir>/access.json`` (mode 0600): a SUPER user for the operator (saved in the ``dev``
context), the inner credential the brokers sign their own requests with (also the name
server's), and a NORMAL application user allowed only what the demo traffic does (Pub and
Sub on the demo topics, Sub on the demo groups).  The name server and brokers get
``authenticationEnabled``/``authorizationEnabled`` and the SUPER/inner users in their configs;
the demo traffic reads the application key from ``app.credentials.json``.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import ClientError
from engine.protocol.body.auth import AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo
from engine.protocol.signature import Credentials

KEYS_FILE = "access.json"
APP_FILE = "app.credentials.json"
ADMIN_USER = "dev-admin"
APP_USER = "demo-app"
INNER_USER = "dev-inner"


@dataclass(frozen=True, slots=True)
class DevKeys:
    admin: Credentials
    app: Credentials
    inner: Credentials


def _write_private(path: Path, doc: object) -> None:
    fd = os.open(path.with_suffix(".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, json.dumps(doc, indent=2).encode())
    finally:
        os.close(fd)
    path.with_suffix(".tmp").replace(path)


def _creds(doc: dict[str, str]) -> Credentials:
    return Credentials(doc["accessKey"], doc["secretKey"])


def load_or_create(data_dir: Path) -> DevKeys:
    """The data dir's keys, generated (and saved mode 0600) on first use."""
    path = data_dir / KEYS_FILE
    try:
        doc = json.loads(path.read_text())
        keys = DevKeys(_creds(doc["admin"]), _creds(doc["app"]), _creds(doc["inner"]))
    except (OSError, ValueError, KeyError, TypeError):
        keys = DevKeys(*(Credentials(name, secrets.token_urlsafe(18))
                         for name in (ADMIN_USER, APP_USER, INNER_USER)))
        _write_private(path, {k: {"accessKey": c.access_key, "secretKey": c.secret_key}
                              for k, c in (("admin", keys.admin), ("app", keys.app),
                                           ("inner", keys.inner))})
    _write_private(data_dir / APP_FILE, {"accessKey": keys.app.access_key,
                                         "secretKey": keys.app.secret_key})
    return keys


def existing(data_dir: Path) -> DevKeys | None:
    """The keys of a secured dev cluster, None for an open one."""
    if not (data_dir / KEYS_FILE).exists():
        return None
    return load_or_create(data_dir)


def forget(data_dir: Path) -> None:
    """``--open``: no keys any more."""
    for name in (KEYS_FILE, APP_FILE):
        (data_dir / name).unlink(missing_ok=True)


def read_app_credentials(path: str) -> Credentials:
    """The application key the demo traffic signs with."""
    return _creds(json.loads(Path(path).read_text()))


def config_lines(keys: DevKeys | None, *, broker: bool) -> list[str]:
    """The access-control lines of a broker's or the name server's config."""
    if keys is None:
        return []
    init = json.dumps({"username": keys.admin.access_key, "password": keys.admin.secret_key})
    inner = json.dumps({"accessKey": keys.inner.access_key,
                        "secretKey": keys.inner.secret_key})
    lines = ["authenticationEnabled=true", f"initAuthenticationUser={init}",
             f"innerClientAuthenticationCredentials={inner}"]
    return [*lines, "authorizationEnabled=true"] if broker else lines


async def grant_app(admin: MQAdmin, brokers: list[str], keys: DevKeys, topics: list[str],
                    groups: list[str]) -> None:
    """Create the application user (if missing) and its rules on every broker."""
    subject = f"User:{keys.app.access_key}"
    entries = ([PolicyEntryInfo(f"Topic:{t}", ["Pub", "Sub"], None, "Allow") for t in topics]
               + [PolicyEntryInfo(f"Group:{g}", ["Sub"], None, "Allow") for g in groups])
    for addr in brokers:
        try:
            await admin.broker.create_user(addr, UserInfo(keys.app.access_key,
                                                          keys.app.secret_key, "Normal"))
        except ClientError:
            if await admin.broker.get_user(addr, keys.app.access_key) is None:
                raise
        await admin.broker.update_acl(addr, AclInfo(subject, [PolicyInfo("Custom", entries)]))

"""Users and rules of one broker: kept in its config folder, changed with 5.3's semantics.

How this works: ``<config>/users.json`` and ``<config>/acls.json`` hold 5.3's UserInfo and
AclInfo shapes (mode 0600: passwords are the HMAC secrets, as in 5.3's RocksDB), written
atomically with a `.bak`.  With ACL 1.0 on (`aclEnable`), the converted plain_acl.yml
accounts are an overlay: a name in the 2.0 store wins, and the first 2.0 change to a 1.0-only
name copies it into the 2.0 store first (what 5.3's migration would have done).  `reload`
re-reads changed files; a file that does not parse keeps the last good rules and logs one line.
Every change ends with `on_change(tables())`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import replace

import orjson

from engine.auth.errors import AuthFileError, AuthInputError
from engine.auth.files import mtime, write_private
from engine.auth.guard import AuthTables
from engine.auth.model import (
    Acl,
    Policy,
    PolicyType,
    Resource,
    User,
    UserStatus,
    UserType,
    acl_from_info,
    acl_to_info,
    user_from_info,
    user_to_info,
)
from engine.auth.plain_acl import PlainAclSnapshot, find_files, load_snapshot
from engine.protocol.body.auth import AclInfo, UserInfo
from engine.protocol.errors import ProtocolError
from engine.protocol.wire import from_json, to_json

log = logging.getLogger("engine.auth")

USERS_JSON = "users.json"
ACLS_JSON = "acls.json"


def _read_json(path: str, *, bak: bool) -> object | None:
    """Parsed JSON of `path` (or, when `bak`, its `.bak`); None when missing.

    Raises:
        AuthFileError: the file exists but neither it nor the .bak parses.
    """
    for candidate in (path, path + ".bak") if bak else (path,):
        try:
            with open(candidate, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise AuthFileError(f"cannot read {candidate}: {exc.strerror or exc}") from None
        if not raw.strip():
            continue
        try:
            value: object = orjson.loads(raw)
            return value
        except orjson.JSONDecodeError as exc:
            if bak and candidate == path and os.path.exists(path + ".bak"):
                log.warning("%s does not parse (%s): reading %s.bak", path, exc, path)
                continue
            raise AuthFileError(f"{candidate} is not valid JSON: {exc}") from None
    return None


def _items(doc: object, key: str, path: str) -> list[object]:
    if doc is None:
        return []
    if not isinstance(doc, dict) or not isinstance(doc.get(key, []), list):
        raise AuthFileError(f"{path}: expected {{\"{key}\": [...]}}")
    items: list[object] = doc.get(key, [])
    return items


class AuthStore:
    """The 2.0 users and rules (persisted) plus the 1.0 overlay (read from plain_acl files)."""

    def __init__(self, config_dir: str, *, rocketmq_home: str | None = None,
                 on_change: Callable[[AuthTables], None] | None = None) -> None:
        self.users_path = os.path.join(config_dir, USERS_JSON)
        self.acls_path = os.path.join(config_dir, ACLS_JSON)
        self.rocketmq_home = rocketmq_home
        self.on_change = on_change
        self.users: dict[str, User] = {}
        self.acls: dict[str, Acl] = {}
        self.v1: PlainAclSnapshot | None = None
        self._stamps: dict[str, float | None] = {}

    # ------------------------------------------------------------------ files

    def _read_users(self, *, bak: bool) -> dict[str, User]:
        out = {}
        try:
            for item in _items(_read_json(self.users_path, bak=bak), "users", self.users_path):
                user = user_from_info(from_json(UserInfo, item))
                out[user.username] = user
        except (AuthInputError, ProtocolError) as exc:
            raise AuthFileError(f"{self.users_path}: {exc}") from None
        return out

    def _read_acls(self, *, bak: bool) -> dict[str, Acl]:
        out = {}
        try:
            for item in _items(_read_json(self.acls_path, bak=bak), "acls", self.acls_path):
                acl = acl_from_info(from_json(AclInfo, item))
                out[acl.subject[len("User:"):]] = acl
        except (AuthInputError, ProtocolError) as exc:
            raise AuthFileError(f"{self.acls_path}: {exc}") from None
        return out

    def _watched(self) -> list[str]:
        paths = [self.users_path, self.acls_path]
        if self.rocketmq_home is not None:
            paths += find_files(self.rocketmq_home)
        return paths

    def load(self) -> None:
        """Read everything (at start).

        Raises:
            AuthFileError: a file (and its .bak) does not parse.
        """
        self._stamps = {p: mtime(p) for p in self._watched()}
        users, acls = self._read_users(bak=True), self._read_acls(bak=True)
        v1 = load_snapshot(self.rocketmq_home) if self.rocketmq_home is not None else None
        self.users, self.acls, self.v1 = users, acls, v1
        self._changed()

    def reload(self, *, force: bool = False) -> bool:
        """Re-read when a watched file changed; on a bad file keep the last good rules."""
        stamps = {p: mtime(p) for p in self._watched()}
        if stamps == self._stamps and not force:
            return False
        self._stamps = stamps
        try:
            users, acls = self._read_users(bak=False), self._read_acls(bak=False)
            v1 = load_snapshot(self.rocketmq_home) if self.rocketmq_home is not None else None
        except AuthFileError as exc:
            log.error("access control not reloaded, keeping the last good users and rules: %s",
                      exc)
            return False
        self.users, self.acls, self.v1 = users, acls, v1
        self._changed()
        log.info("access control reloaded: %d users, %d rule sets", len(self.users),
                 len(self.acls))
        return True

    def _persist(self) -> None:
        users = {"users": [to_json(user_to_info(u)) for u in self.users.values()]}
        acls = {"acls": [to_json(acl_to_info(a)) for a in self.acls.values()]}
        write_private(self.users_path, orjson.dumps(users, option=orjson.OPT_INDENT_2))
        write_private(self.acls_path, orjson.dumps(acls, option=orjson.OPT_INDENT_2))
        self._stamps = {p: mtime(p) for p in self._watched()}
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self.tables())

    # ------------------------------------------------------------------ the merged view

    def tables(self) -> AuthTables:
        v1 = self.v1
        if v1 is None:
            return AuthTables(dict(self.users), dict(self.acls))
        users = {**v1.users, **self.users}
        acls = {n: a for n, a in v1.acls.items() if n not in self.users}
        acls.update(self.acls)
        whites = {n: m for n, m in v1.user_whites.items() if n not in self.users}
        return AuthTables(users, acls, v1.global_whites, whites)

    def user(self, name: str) -> User | None:
        return self.users.get(name) or (self.v1.users.get(name) if self.v1 else None)

    def acl(self, name: str) -> Acl | None:
        if name in self.users or self.v1 is None:
            return self.acls.get(name)
        return self.v1.acls.get(name)

    def _materialize(self, name: str) -> None:
        """Copy a 1.0-only account into the 2.0 store before changing it."""
        if name in self.users or self.v1 is None or name not in self.v1.users:
            return
        self.users[name] = self.v1.users[name]
        if name in self.v1.acls:
            self.acls[name] = self.v1.acls[name]

    # ------------------------------------------------------------------ 5.3 mutations

    def create_user(self, user: User) -> None:
        if not user.password:
            raise AuthInputError("the password is blank")
        if self.user(user.username) is not None:
            raise AuthInputError(f"the user {user.username!r} exists")
        self.users[user.username] = user
        self._persist()

    def update_user(self, name: str, password: str | None, user_type: UserType | None,
                    status: UserStatus | None) -> None:
        old = self.user(name)
        if old is None:
            raise AuthInputError(f"the user {name!r} does not exist")
        self._materialize(name)
        new = replace(old, password=password or old.password,
                      user_type=user_type or old.user_type,
                      status=status or old.status)
        self.users[name] = new
        self._persist()

    def delete_user(self, name: str) -> None:
        """Deletes the user and its rules; an absent user is no error (5.3)."""
        if name not in self.users and self.acls.get(name) is None:
            if self.v1 is not None and name in self.v1.users:
                raise AuthInputError(f"the user {name!r} comes from plain_acl.yml: delete it "
                                     "there or with deleteAclConfig")
            return
        self.users.pop(name, None)
        self.acls.pop(name, None)
        self._persist()

    def put_acl(self, acl: Acl) -> None:
        """5.3 createAcl/updateAcl: merge into the subject's rules (created when absent)."""
        name = acl.subject[len("User:"):]
        if self.user(name) is None:
            raise AuthInputError(f"the subject {acl.subject} does not exist")
        self._materialize(name)
        old = self.acls.get(name)
        self.acls[name] = acl if old is None else old.updated(acl)
        self._persist()

    def delete_acl(self, name: str, ptype: PolicyType | None, resource: Resource | None) -> None:
        if self.user(name) is None:
            raise AuthInputError(f"the subject User:{name} does not exist")
        if self.acl(name) is None:
            raise AuthInputError(f"User:{name} has no rules")
        self._materialize(name)
        old = self.acls[name]
        new = None if resource is None else old.without(ptype or PolicyType.CUSTOM, resource)
        if new is None or not new.policies:
            del self.acls[name]
        else:
            self.acls[name] = new
        self._persist()

    def list_users(self, contains: str | None = None) -> list[User]:
        users = self.tables().users
        return [u for n, u in sorted(users.items()) if not contains or contains in n]

    def list_acls(self, subject_filter: str | None = None,
                  resource_filter: str | None = None) -> list[Acl]:
        out = []
        for _name, acl in sorted(self.tables().acls.items()):
            if subject_filter and subject_filter not in acl.subject:
                continue
            if resource_filter:
                kept = tuple(Policy(p.type, tuple(e for e in p.entries
                                                  if resource_filter in e.resource.key))
                             for p in acl.policies)
                kept = tuple(p for p in kept if p.entries)
                if not kept:
                    continue
                acl = Acl(acl.subject, kept)
            out.append(acl)
        return out

"""The per-request check: authenticate (signature), then authorize (rules), or refuse.

How this works: `AuthTables` is an immutable snapshot of users, rules and ACL 1.0 white
addresses; a reload swaps the whole snapshot, so a check never sees half an update.  Each
user's keyed HMAC is built once per snapshot, and authorization answers are cached per (user,
source IP, `needs_key` of the request: its code and the extFields its rule in the needs table
reads, or else the needs themselves) until the next snapshot.  A refusal is NO_PERMISSION (16)
with a remark saying what was missing; it never carries a secret.  With neither
authentication nor authorization on, no guard is installed at all (the dispatcher then tests
one attribute per request).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from engine.auth.addresses import AddressMatcher, source_ip
from engine.auth.decide import authorize
from engine.auth.model import Acl, User, UserStatus, UserType
from engine.auth.needs import Need
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.errors import ProtocolError
from engine.protocol.signature import ACCESS_KEY, Verifier

log = logging.getLogger("engine.auth")

CACHE_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class AuthTables:
    """Users and rules by username, plus ACL 1.0's white addresses."""

    users: Mapping[str, User] = field(default_factory=dict)
    acls: Mapping[str, Acl] = field(default_factory=dict)
    global_whites: tuple[AddressMatcher, ...] = ()
    user_whites: Mapping[str, AddressMatcher] = field(default_factory=dict)


NeedsFn = Callable[[RemotingCommand], list[Need]]


def _code_name(code: int) -> str:
    try:
        return f"{RequestCode(code).name} ({code})"
    except ValueError:
        return f"request code {code}"


class AccessGuard:
    """Checks requests against one `AuthTables` snapshot (replaced with `install`)."""

    def __init__(self, needs: NeedsFn, *, authentication: bool, authorization: bool,
                 super_only: bool = False,
                 needs_key: Callable[[RemotingCommand], tuple[object, ...] | None] | None = None
                 ) -> None:
        self.needs = needs
        #: What `needs` depends on (None: uncachable); decisions are cached by it.
        self.needs_key = needs_key
        self.authentication = authentication
        self.authorization = authorization
        #: Name server: authorization means "a SUPER user", whatever the request.
        self.super_only = super_only
        self.tables = AuthTables()
        self._verifiers: dict[str, Verifier] = {}
        self._cache: dict[tuple[str, str, object], str | None] = {}

    def install(self, tables: AuthTables) -> None:
        self._verifiers = {name: Verifier(u.password) for name, u in tables.users.items()}
        self._cache = {}
        self.tables = tables

    @property
    def cached_decisions(self) -> int:
        """How many authorization answers the current snapshot has cached."""
        return len(self._cache)

    # ------------------------------------------------------------------ the check

    def refusal(self, cmd: RemotingCommand, remote_addr: str) -> str | None:
        """None when the request may proceed, else what was missing."""
        tables = self.tables
        ip = source_ip(remote_addr)
        if tables.global_whites and any(m(ip) for m in tables.global_whites):
            return None
        ext = cmd.ext_fields
        access_key = ext.get(ACCESS_KEY) if ext else None
        what = _code_name(cmd.code)
        if not access_key:
            return f"{what} is not signed: AccessKey and Signature are required"
        user = tables.users.get(access_key)
        if user is None:
            return f"{what}: unknown AccessKey {access_key!r}"
        if user.status is UserStatus.DISABLE:
            return f"{what}: user {access_key!r} is disabled"
        white = tables.user_whites.get(access_key)
        if white is not None and white(ip):
            return None  # ACL 1.0: a white address needs neither signature nor perms
        if self.authentication and not self._verifiers[access_key].verify(cmd):
            return f"{what}: signature check failed for AccessKey {access_key!r}"
        if not self.authorization or user.user_type is UserType.SUPER:
            return None
        if self.super_only:
            return f"{what} needs a SUPER user; {access_key!r} is NORMAL"
        return self._authorize(cmd, what, user, ip)

    def _authorize(self, cmd: RemotingCommand, what: str, user: User, ip: str) -> str | None:
        cache = self._cache
        cheap = self.needs_key(cmd) if self.needs_key is not None else None
        key = (user.username, ip, cheap)
        if cheap is not None and key in cache:
            return cache[key]
        try:
            needs = tuple(self.needs(cmd))
        except ProtocolError as exc:
            return f"{what}: cannot tell what the request touches: {exc}"
        if cheap is None:
            key = (user.username, ip, needs)
            if key in cache:
                return cache[key]
        why = authorize(user, self.tables.acls.get(user.username), needs, ip)
        answer = None if why is None else f"{what}: User:{user.username} from {ip}: {why}"
        if len(cache) >= CACHE_LIMIT:
            cache.clear()
        cache[key] = answer
        return answer

    def __call__(self, cmd: RemotingCommand, remote_addr: str) -> RemotingCommand | None:
        """The NO_PERMISSION answer for a refused request, None for an accepted one."""
        why = self.refusal(cmd, remote_addr)
        if why is None:
            return None
        log.info("refused %s from %s", why, remote_addr)
        return cmd.response(ResponseCode.NO_PERMISSION, why)

"""Request signatures (ACL 1.0 and 2.0 alike): HMAC-SHA1 over the sorted extFields and the body.

How this works (4.9.7 `AclClientRPCHook`/`AclUtils`/`AclSigner`, 5.3 `DefaultAuthentication
ContextBuilder`): the client adds `AccessKey` (and `SecurityToken` when it has one) to
extFields, sorts extFields by key (Java `TreeMap`: UTF-16 code-unit order), concatenates the
values of every key but `Signature` as UTF-8, appends the body, and sends
base64(HMAC-SHA1(secretKey, content)) as `Signature`.  The verifier rebuilds the same content;
5.3 also leaves out `_UNIQUE_KEY_QUERY` for clients of version <= V4_9_3 (399), which signed
before adding it (4.9.7 always left it out, which broke newer clients' queries by unique key).
The broker compares signatures in constant time.  Empty values add nothing to the content, so
the ROCKETMQ binary header dropping them (remoting.md §2.2) changes nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from engine.protocol.command import RemotingCommand

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
#: MQVersion V4_9_3: clients up to this version did not sign `_UNIQUE_KEY_QUERY`.
UNIQUE_KEY_SIGNED_SINCE = 400


@dataclass(frozen=True, slots=True)
class Credentials:
    """An access key and its secret (the secret never shows in repr)."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)


def _sorted_keys(keys: Iterable[str]) -> list[str]:
    """Keys in Java `String.compareTo` order (UTF-16 code units; code points agree for BMP)."""
    ordered = sorted(keys)
    if "".join(ordered).isascii():
        return ordered
    return sorted(ordered, key=lambda k: k.encode("utf-16-be"))


def content_prefix(ext_fields: Mapping[str, str], *, skip: frozenset[str] = frozenset()) -> bytes:
    """The signed text before the body: values of the sorted keys but Signature (and `skip`)."""
    keys = _sorted_keys(ext_fields)
    if SIGNATURE in ext_fields:
        keys.remove(SIGNATURE)
    for key in skip:
        if key in ext_fields:
            keys.remove(key)
    return "".join(map(ext_fields.__getitem__, keys)).encode("utf-8")


def signature_of(prefix: bytes, body: bytes | memoryview | None, secret: str | bytes) -> str:
    """base64(HMAC-SHA1(secret, prefix + body))."""
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    mac = hmac.new(key, prefix, hashlib.sha1)
    if body:
        mac.update(body)
    return base64.b64encode(mac.digest()).decode("ascii")


def sign(cmd: RemotingCommand, credentials: Credentials) -> RemotingCommand:
    """The request with `AccessKey`, `SecurityToken` (when set) and `Signature` added."""
    ext = dict(cmd.ext_fields) if cmd.ext_fields else {}
    ext.pop(SIGNATURE, None)
    ext[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        ext[SECURITY_TOKEN] = credentials.security_token
    ext[SIGNATURE] = signature_of(content_prefix(ext), cmd.body, credentials.secret_key)
    return replace(cmd, ext_fields=ext)


class Verifier:
    """Checks signatures made with one secret; the keyed HMAC is built once and copied."""

    __slots__ = ("_mac",)

    def __init__(self, secret: str) -> None:
        self._mac: Any = hmac.new(secret.encode("utf-8"), digestmod=hashlib.sha1)

    def expected(self, cmd: RemotingCommand) -> str:
        ext = cmd.ext_fields or {}
        skip: frozenset[str] = frozenset()
        if cmd.version <= UNIQUE_KEY_SIGNED_SINCE - 1 and UNIQUE_KEY_QUERY in ext:
            skip = frozenset((UNIQUE_KEY_QUERY,))
        mac = self._mac.copy()
        mac.update(content_prefix(ext, skip=skip))
        if cmd.body:
            mac.update(cmd.body)
        return base64.b64encode(mac.digest()).decode("ascii")

    def verify(self, cmd: RemotingCommand) -> bool:
        """True when the request's `Signature` is the one its content and this secret give."""
        given = cmd.ext(SIGNATURE)
        if not given:
            return False
        return hmac.compare_digest(self.expected(cmd).encode(), given.encode("utf-8", "replace"))

"""5.3's access-control settings given as JSON text: `initAuthenticationUser` and
`innerClientAuthenticationCredentials` (both become SUPER users where they are configured)."""

from __future__ import annotations

import json

from engine.auth.errors import AuthConfigError
from engine.auth.model import User, UserType
from engine.protocol.signature import Credentials


def _json_object(text: str, key: str, example: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise AuthConfigError(f"{key} is not a JSON object like {example}")
    return value


def parse_credentials(text: str | None) -> Credentials | None:
    """`innerClientAuthenticationCredentials` ({"accessKey","secretKey"}); None when unset.

    Raises:
        AuthConfigError: not JSON with both keys.
    """
    if not (text or "").strip():
        return None
    key = "innerClientAuthenticationCredentials"
    doc = _json_object(str(text), key, '{"accessKey":"...","secretKey":"..."}')
    ak, sk = str(doc.get("accessKey") or ""), str(doc.get("secretKey") or "")
    if not ak or not sk:
        raise AuthConfigError(f"{key} needs accessKey and secretKey")
    return Credentials(ak, sk)


def parse_init_user(text: str | None) -> User | None:
    """`initAuthenticationUser` ({"username","password"}) as a SUPER user; None when unset.

    Raises:
        AuthConfigError: not JSON with both keys.
    """
    if not (text or "").strip():
        return None
    key = "initAuthenticationUser"
    doc = _json_object(str(text), key, '{"username":"...","password":"..."}')
    name, password = str(doc.get("username") or ""), str(doc.get("password") or "")
    if not name or not password:
        raise AuthConfigError(f"{key} needs username and password")
    return User(name, password, UserType.SUPER)


def super_users(init_user: str | None, inner: str | None) -> list[User]:
    """The SUPER users the two settings define."""
    users = []
    user = parse_init_user(init_user)
    if user is not None:
        users.append(user)
    creds = parse_credentials(inner)
    if creds is not None:
        users.append(User(creds.access_key, creds.secret_key, UserType.SUPER))
    return users

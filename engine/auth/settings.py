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


def _pair(text: str | None, key: str, first: str, second: str) -> tuple[str, str] | None:
    """The two non-empty string fields of JSON setting `key`; None when the setting is unset.

    Raises:
        AuthConfigError: not a JSON object with both fields.
    """
    if not (text or "").strip():
        return None
    doc = _json_object(str(text), key, f'{{"{first}":"...","{second}":"..."}}')
    a, b = str(doc.get(first) or ""), str(doc.get(second) or "")
    if not a or not b:
        raise AuthConfigError(f"{key} needs {first} and {second}")
    return a, b


def parse_credentials(text: str | None) -> Credentials | None:
    """`innerClientAuthenticationCredentials` ({"accessKey","secretKey"}); None when unset.

    Raises:
        AuthConfigError: not JSON with both keys.
    """
    pair = _pair(text, "innerClientAuthenticationCredentials", "accessKey", "secretKey")
    return None if pair is None else Credentials(*pair)


def parse_init_user(text: str | None) -> User | None:
    """`initAuthenticationUser` ({"username","password"}) as a SUPER user; None when unset.

    Raises:
        AuthConfigError: not JSON with both keys.
    """
    pair = _pair(text, "initAuthenticationUser", "username", "password")
    return None if pair is None else User(*pair, UserType.SUPER)


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

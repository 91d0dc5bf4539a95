"""The broker's JSON-valued auth settings: both fields required, clear errors."""

from __future__ import annotations

import pytest

from engine.auth.settings import AuthConfigError, parse_credentials, parse_init_user


def test_unset_settings_are_none() -> None:
    assert parse_credentials(None) is None and parse_init_user("  ") is None


def test_both_fields_make_the_value() -> None:
    creds = parse_credentials('{"accessKey": "inner", "secretKey": "s3"}')
    assert creds is not None and (creds.access_key, creds.secret_key) == ("inner", "s3")
    user = parse_init_user('{"username": "root", "password": "pw"}')
    assert user is not None and (user.username, user.password) == ("root", "pw")


@pytest.mark.parametrize(("parse", "text", "message"), [
    (parse_credentials, '{"accessKey": "a"}', "needs accessKey and secretKey"),
    (parse_init_user, '{"password": "p"}', "needs username and password"),
    (parse_init_user, "[1]", 'is not a JSON object like {"username":"...","password":"..."}'),
])
def test_a_missing_field_or_bad_json_is_named(parse: object, text: str, message: str) -> None:
    with pytest.raises(AuthConfigError, match=message.replace("[", r"\[").replace("{", r"\{")):
        parse(text)  # type: ignore[operator]

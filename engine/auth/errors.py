"""Errors of the access-control package.

    AuthError
     ├── AuthInputError     a user, rule or ACL 1.0 account that is not acceptable (bad name,
     │                      unknown action, user exists / does not exist, bad address pattern)
     ├── AuthFileError      a users/rules/plain_acl file that cannot be read or parsed
     └── AuthConfigError    settings that cannot work (authentication on and no user, bad
                            initAuthenticationUser / innerClientAuthenticationCredentials)
"""

from __future__ import annotations


class AuthError(Exception):
    """Base of every error raised by `engine.auth`."""


class AuthInputError(AuthError):
    """A user, rule or account that is not acceptable."""


class AuthFileError(AuthError):
    """A users, rules or plain_acl file that cannot be read or parsed."""


class AuthConfigError(AuthError):
    """Access-control settings that cannot work."""

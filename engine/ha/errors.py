"""Errors of the HA package.

    HAError
     ├── HAProtocolError     bytes on the HA port that do not follow the layout (wire.py)
     └── RoleFileError       a role file that cannot be read or written (role_file.py)

Replication problems that the protocol resolves by reconnecting (an offset mismatch, a
silent peer) are not exceptions: the connection is closed and logged.
"""

from __future__ import annotations


class HAError(Exception):
    """Base class of the HA package's errors."""


class HAProtocolError(HAError):
    """The peer sent bytes that are not a valid report or transfer."""


class RoleFileError(HAError):
    """The persisted role cannot be read or written."""

"""Errors of the asyncio transport.

    RemotingError
     ├── RemotingConnectError   could not open a connection to the address
     ├── RemotingTimeoutError   no response within the call's timeout
     ├── RemotingClosedError    the connection closed while the call was pending
     └── RemotingSendError      the request could not be written
"""

from __future__ import annotations


class RemotingError(Exception):
    """Base of every transport error; `addr` names the peer when known."""

    def __init__(self, message: str, addr: str | None = None) -> None:
        super().__init__(message)
        self.addr = addr


class RemotingConnectError(RemotingError):
    """The peer could not be reached (refused, unresolvable, connect timeout)."""


class RemotingTimeoutError(RemotingError):
    """The peer did not answer in time."""


class RemotingClosedError(RemotingError):
    """The connection closed (or was closed) before the answer came."""


class RemotingSendError(RemotingError):
    """The request could not be written to the connection."""

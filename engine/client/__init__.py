"""Admin client: typed calls to name servers (and, later, brokers) over `engine.remoting`."""

from __future__ import annotations

from engine.client.errors import (
    BadResponseError,
    ClientError,
    InvalidAddressError,
    NotFoundError,
    ServerError,
    UnreachableError,
)
from engine.client.namesrv import NamesrvAdmin, ServerOutcome

__all__ = [
    "BadResponseError",
    "ClientError",
    "InvalidAddressError",
    "NamesrvAdmin",
    "NotFoundError",
    "ServerError",
    "ServerOutcome",
    "UnreachableError",
]

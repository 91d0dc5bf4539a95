"""One admin request to one broker: send, map errors, decode the header or body.

How this works: `BrokerCalls` is the base of the `BrokerAdmin` call families (topics and
groups, consumers, offsets, messages, settings).  A broker has one address and no fail-over:
a transport failure becomes `UnreachableError` naming that broker, an error code becomes its
registered `ServerError` (`errors.raise_for`), and an answer whose header or body does not
decode becomes `BadResponseError`.  Bodies are read with `fastjson.loads`, so a Java broker's
non-standard JSON (unquoted integer keys, `MessageQueue` objects as map keys) parses as well
as standard JSON.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

from engine.client.core.errors import (
    BadResponseError,
    InvalidAddressError,
    ServerError,
    UnreachableError,
    raise_for,
)
from engine.protocol import fastjson
from engine.protocol.command import RemotingCommand, request
from engine.protocol.errors import ProtocolError
from engine.protocol.wire import from_ext, from_json
from engine.remoting.address import parse_addr
from engine.remoting.client import RemotingClient
from engine.remoting.errors import RemotingError

T = TypeVar("T")

DEFAULT_TIMEOUT = 3.0
#: Calls the broker relays to a consumer wait this many default timeouts (Apache's mqadmin
#: waits three times its timeout for them; the broker itself waits up to 10 s for the client).
RELAYED_TIMEOUT_FACTOR = 3


def decode_body(cls: type[T], body: bytes | None, addr: str | None = None) -> T:
    """A JSON body, standard or fastjson, as `cls`.

    Raises:
        BadResponseError: no body, or one that is not a `cls`.
    """
    if not body:
        raise BadResponseError(f"{cls.__name__} answer without a body", addr)
    try:
        return from_json(cls, fastjson.loads(body))
    except ProtocolError as exc:
        raise BadResponseError(f"{cls.__name__} body does not decode: {exc}", addr) from None


def decode_header(cls: type[T], cmd: RemotingCommand, addr: str | None = None) -> T:
    """The response's extFields as the header `cls`.

    Raises:
        BadResponseError: a field is missing or does not parse.
    """
    try:
        return from_ext(cls, cmd.ext_fields)
    except ProtocolError as exc:
        raise BadResponseError(f"response header does not decode: {exc}", addr) from None


class BrokerCalls:
    """Sends admin requests to brokers by address over a shared `RemotingClient`."""

    def __init__(self, client: RemotingClient, timeout: float = DEFAULT_TIMEOUT) -> None:
        """
        Args:
            client: the client whose connections the calls use; the caller closes it.
            timeout: seconds to wait for each answer (calls relayed to a consumer wait
                `RELAYED_TIMEOUT_FACTOR` times as long unless given their own).
        """
        self.client = client
        self.timeout = timeout

    @property
    def relayed_timeout(self) -> float:
        return self.timeout * RELAYED_TIMEOUT_FACTOR

    async def _call(self, addr: str, code: int, ext: dict[str, str] | None = None,
                    body: bytes | None = None, *, timeout: float | None = None,
                    language: int | None = None) -> RemotingCommand:
        """Send one request to `addr`; returns its SUCCESS response.

        Raises:
            InvalidAddressError: `addr` is not ``host:port``.
            UnreachableError: the broker refused the connection, closed it or timed out.
            ServerError: the broker answered with an error code.
        """
        try:
            parse_addr(addr)
        except ValueError as exc:
            raise InvalidAddressError(str(exc)) from None
        cmd = request(code, ext, body)
        if language is not None:
            cmd = dataclasses.replace(cmd, language=language)
        try:
            response = await self.client.invoke(addr, cmd,
                                                self.timeout if timeout is None else timeout)
        except RemotingError as exc:
            raise UnreachableError([(addr, exc)], role="broker") from None
        try:
            return raise_for(response, addr)
        except ServerError as exc:
            exc.role = "broker"  # the answer came from a broker (hints differ by role)
            raise

    async def _body(self, cls: type[T], addr: str, code: int,
                    ext: dict[str, str] | None = None, body: bytes | None = None, *,
                    timeout: float | None = None) -> T:
        """`_call`, then the response body as `cls` (see `decode_body`)."""
        resp = await self._call(addr, code, ext, body, timeout=timeout)
        return decode_body(cls, resp.body, addr)

    async def _header(self, cls: type[T], addr: str, code: int,
                      ext: dict[str, str] | None = None) -> T:
        """`_call`, then the response header as `cls` (see `decode_header`)."""
        resp = await self._call(addr, code, ext)
        return decode_header(cls, resp, addr)

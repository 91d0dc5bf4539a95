"""A controller-mode broker's calls to its controllers: the leader found and kept.

`controllerAddr` lists every controller (`;`-separated).  Heartbeats go to all of them (each
keeps its own liveness table); the other requests go to the leader, found by trying the
addresses until one answers something other than CONTROLLER_NOT_LEADER or a network error,
and kept until it stops answering.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient
from engine.remoting.errors import RemotingError

log = logging.getLogger("engine.broker.controller_mode")

TIMEOUT_S = 3.0


class ControllerUnavailable(Exception):
    """No controller answered as the leader."""


class ControllerClient:
    def __init__(self, client: RemotingClient, addresses: str) -> None:
        self.client = client
        self.addresses = [a.strip() for a in addresses.split(";") if a.strip()]
        self.leader: str | None = None

    def _command(self, code: int, header: Any, body: bytes | None) -> RemotingCommand:
        return request(code, to_ext(header) if header is not None else None, body)

    async def call(self, code: int, header: Any = None,
                   body: bytes | None = None) -> RemotingCommand:
        """The leader's answer.

        Raises:
            ControllerUnavailable: no controller answered as the leader.
        """
        order = ([self.leader] if self.leader else []) + [
            a for a in self.addresses if a != self.leader]
        for address in order:
            try:
                answer = await self.client.invoke(address, self._command(code, header, body),
                                                  TIMEOUT_S)
            except (RemotingError, OSError):
                continue
            if answer.code == ResponseCode.CONTROLLER_NOT_LEADER:
                continue
            self.leader = address
            return answer
        self.leader = None
        raise ControllerUnavailable(f"no controller of {';'.join(self.addresses)} answered "
                                    "as the leader")

    async def heartbeat(self, header: Any) -> None:
        """BROKER_HEARTBEAT to every controller; one that does not answer is skipped."""
        async def one(address: str) -> None:
            try:
                await self.client.invoke(address, self._command(
                    RequestCode.BROKER_HEARTBEAT, header, None), TIMEOUT_S)
            except (RemotingError, OSError) as exc:
                log.debug("heartbeat to controller %s failed: %s", address, exc)

        await asyncio.gather(*(one(a) for a in self.addresses))

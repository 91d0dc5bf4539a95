"""Registration with every name server: at start, every registerNameServerPeriod, on change.

How this works: `register_all` sends REGISTER_BROKER to all configured name servers in
parallel (each with registerBrokerTimeoutMills) and records what a slave learns from the
answers: its master's address and HA address.  `extra_fields` adds ext fields to each request
(the HA epoch) and `on_registered` sees every round's results with the answers' ext fields
(the name servers' epoch verdict).  A topic change calls `request()`, which coalesces into one
extra registration, unless a `register_all` began after the change: every round clears
the request as it starts, since each of its requests is built later.  A topic creation and
a change of the broker's permission call `register_all` themselves and answer after it, as
Apache does: the name servers have the change when the admin has the answer, and no round
carrying it is still under way when the admin goes on (to delete the topic, say).
`stop()` unregisters from every name server.

The topic table is read for each name server in the same step that writes the request to it
(the connection open first), never before an await: a registration read before a topic was
deleted here and written after the delete was answered could reach the name server after an
admin's DELETE_TOPIC_IN_NAMESRV and bring the route back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.broker.config import BrokerConfig
from engine.broker.topics import TopicConfigManager
from engine.protocol.body.register import RegisterBrokerBody
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.header.namesrv import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)
from engine.protocol.perm import PERM_WRITE, is_writeable
from engine.protocol.wire import from_ext, to_ext
from engine.remoting.client import RemotingClient
from engine.remoting.errors import RemotingError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Registration:
    namesrv: str
    ok: bool
    master_addr: str | None = None
    ha_server_addr: str | None = None
    error: str | None = None
    ext: dict[str, str] = field(default_factory=dict)  # the answer's ext fields


class NamesrvRegistration:
    """Keeps this broker registered on every name server."""

    def __init__(
        self,
        config: Callable[[], BrokerConfig],
        topics: TopicConfigManager,
        client: RemotingClient,
        on_master: Callable[[str | None, str | None], None] | None = None,
        ha_server_addr: Callable[[], str] | None = None,
    ) -> None:
        self._config = config
        self._ha_server_addr = ha_server_addr
        self.extra_fields: Callable[[], dict[str, str]] | None = None
        self.on_registered: Callable[[list[Registration]], None] | None = None
        self.topics = topics
        self.client = client
        self.on_master = on_master
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        self.last: list[Registration] = []

    def _body(self, cfg: BrokerConfig) -> bytes:
        cap = None if is_writeable(cfg.broker_permission) else cfg.broker_permission & ~PERM_WRITE
        body = RegisterBrokerBody(self.topics.wrapper(perm_cap=cap), [])
        return body.encode(compressed=cfg.compressed_register)

    def _command(self, cfg: BrokerConfig) -> RemotingCommand:
        body = self._body(cfg)
        header = RegisterBrokerRequestHeader(
            broker_name=cfg.broker_name, broker_addr=cfg.broker_addr,
            cluster_name=cfg.broker_cluster_name,
            ha_server_addr=self._ha_server_addr() if self._ha_server_addr else cfg.ha_server_addr,
            broker_id=cfg.broker_id, compressed=cfg.compressed_register,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF)
        ext = to_ext(header)
        if self.extra_fields is not None:
            ext.update(self.extra_fields())
        return request(RequestCode.REGISTER_BROKER, ext, body)

    async def register_all(self) -> list[Registration]:
        self._wake.clear()  # this round carries every change made so far
        cfg = self._config()
        timeout = cfg.register_broker_timeout_mills / 1000
        results = await asyncio.gather(*(self._register_one(addr, cfg, timeout)
                                         for addr in cfg.namesrv_addrs))
        self.last = list(results)
        for r in results:
            if r.ok and (r.master_addr or r.ha_server_addr) and self.on_master is not None:
                self.on_master(r.master_addr, r.ha_server_addr)
                break
        if self.on_registered is not None:
            self.on_registered(self.last)
        return self.last

    async def _register_one(self, addr: str, cfg: BrokerConfig,
                            timeout: float) -> Registration:
        try:
            await self.client.connection(addr)  # connected: invoke writes without waiting
            resp = await self.client.invoke(addr, self._command(cfg), timeout)
        except RemotingError as exc:
            log.warning("register broker to name server %s failed: %s", addr, exc)
            return Registration(addr, False, error=str(exc))
        if resp.code != ResponseCode.SUCCESS:
            log.warning("name server %s refused the registration: %s %s", addr, resp.code,
                        resp.remark)
            return Registration(addr, False, error=f"code {resp.code}: {resp.remark}")
        answer = from_ext(RegisterBrokerResponseHeader, resp.ext_fields)
        return Registration(addr, True, answer.master_addr, answer.ha_server_addr,
                            ext=dict(resp.ext_fields or {}))

    async def unregister_all(self) -> None:
        cfg = self._config()
        header = UnRegisterBrokerRequestHeader(cfg.broker_name, cfg.broker_addr,
                                               cfg.broker_cluster_name, cfg.broker_id)
        cmd = request(RequestCode.UNREGISTER_BROKER, to_ext(header))
        timeout = cfg.register_broker_timeout_mills / 1000

        async def one(addr: str) -> None:
            try:
                await self.client.invoke(addr, cmd, timeout)
            except RemotingError as exc:
                log.warning("unregister from name server %s failed: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in cfg.namesrv_addrs))

    def request(self) -> None:
        """Register again soon (a topic changed)."""
        self._wake.set()

    def start(self) -> None:
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="namesrv-registration")

    async def _run(self) -> None:
        """Re-register every period, or sooner when asked; the first round is the caller's."""
        while not self._stopping:
            try:
                await asyncio.wait_for(self._wake.wait(), self._config().register_period_ms / 1000)
            except TimeoutError:
                pass
            else:
                if not self._wake.is_set():  # a round began since the request: it was served
                    continue
            # 3.11's wait_for can swallow a cancel that races the event: check the flag too.
            if self._stopping:
                return
            try:
                await self.register_all()
            except Exception:
                log.exception("registration round failed")

    async def stop(self, unregister: bool = True) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if unregister:
            await self.unregister_all()

"""`HAClient`: the slave side of replication — connect to the master's HA port, append, report.

How this works (4.9.7 `HAService.HAClient`, 5.x `DefaultHAClient`): one asyncio task keeps a
connection to the master's HA address (asked of `master_addr()` before each attempt: the
configured haMasterAddress or what registration learned).  Right after connecting, the
slave reports its max offset (4.9.7 waits up to 5 s for its first heartbeat; the master
sends nothing before it).  The protocol object appends each transfer synchronously in
`data_received`, exactly at the store's max offset — an empty store starts its log at the
first transfer's offset — and reports the new max offset once per read.  A transfer whose
offset differs from the store's max offset (or bytes that do not fit) closes the
connection; the loop reconnects after `reconnect_interval_ms` and resumes from the store's
max offset.  The session also reports every heartbeat interval and closes a connection that
was silent for the housekeeping interval (5.x checks reads; the master heartbeats).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, cast

from engine.ha.connection import now_ms
from engine.ha.errors import HAProtocolError
from engine.ha.status import HAClientRuntimeInfo, average_record_size, messages_in
from engine.ha.wire import TransferDecoder, encode_report
from engine.remoting.address import parse_addr
from engine.store.message_store import MessageStore

log = logging.getLogger(__name__)


class _SlaveProtocol(asyncio.Protocol):
    def __init__(self, client: HAClient) -> None:
        self.client = client
        self.decoder = TransferDecoder()
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.created_ms = now_ms()
        self.last_read_ms = self.created_ms
        self.last_write_ms = 0
        self.reported = -1
        #: This end of the connection: the master's haConnectionInfo addr of this slave.
        self.local_addr: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        sockname = transport.get_extra_info("sockname")
        if isinstance(sockname, tuple):
            self.local_addr = f"{sockname[0]}:{sockname[1]}"

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)

    def close(self, reason: str) -> None:
        log.warning("HA connection to master %s closed: %s", self.client.connected_to, reason)
        if self.transport is not None:
            self.transport.close()

    def report(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        offset = self.client.store.get_max_phy_offset()
        self.transport.write(encode_report(offset))
        self.reported = offset
        self.last_write_ms = now_ms()

    def data_received(self, data: bytes) -> None:
        self.last_read_ms = now_ms()
        client = self.client
        client.bytes_read += len(data)
        try:
            transfers = self.decoder.feed(data)
        except HAProtocolError as exc:
            self.close(str(exc))
            return
        store = client.store
        for t in transfers:
            end = t.offset + len(t.data)
            if end > client.master_max_offset_seen:
                client.master_max_offset_seen = end
            mine = store.get_max_phy_offset()
            if mine != 0 and mine != t.offset:
                self.close(f"master sent offset {t.offset} but this slave's max offset is "
                           f"{mine}: reconnecting to resume from {mine}")
                return
            if t.data and store.append_raw(t.data, t.offset) < 0:
                self.close(f"{len(t.data)} bytes at offset {t.offset} do not fit this slave's "
                           "commit-log segment (do mappedFileSizeCommitLog settings differ?)")
                return
        if store.get_max_phy_offset() > self.reported:
            self.report()


class HAClient:
    """Keeps this slave replicating from its master."""

    def __init__(
        self,
        store: MessageStore,
        master_addr: Callable[[], str | None],
        *,
        heartbeat_interval_ms: int = 5000,
        housekeeping_interval_ms: int = 20_000,
        reconnect_interval_ms: int = 5000,
        connect_timeout: float = 3.0,
    ) -> None:
        self.store = store
        self.master_addr = master_addr
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.housekeeping_interval_ms = housekeeping_interval_ms
        self.reconnect_interval_ms = reconnect_interval_ms
        self.connect_timeout = connect_timeout
        self.connected_to: str | None = None
        self._last_addr: str | None = None
        self.master_max_offset_seen = 0
        self.master_broker_addr: str | None = None
        self.bytes_read = 0
        self._rate = (now_ms(), 0, 0)  # (mark time, bytes then, bytes per second)
        self._proto: _SlaveProtocol | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Future[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if self.running:
            return
        loop = asyncio.get_running_loop()
        self._stop = loop.create_future()
        self._task = loop.create_task(self._run(), name="ha-client")

    async def stop(self) -> None:
        """Close the connection and end the loop (within one tick)."""
        if self._stop is not None and not self._stop.done():
            self._stop.set_result(None)
        if self._proto is not None:
            self._proto.close("HA client stopping")
        if self._task is not None:
            await self._task
            self._task = None

    def saw_master_offset(self, offset: int) -> None:
        """The master is known to have had `offset` bytes (from its status)."""
        if offset > self.master_max_offset_seen:
            self.master_max_offset_seen = offset

    # ------------------------------------------------------------------ the loop

    async def _pause(self, seconds: float) -> bool:
        """Wait `seconds` unless stopped; True when stopped."""
        assert self._stop is not None
        await asyncio.wait({self._stop}, timeout=seconds)
        return self._stop.done()

    async def _run(self) -> None:
        assert self._stop is not None
        backoff = self.reconnect_interval_ms / 1000
        while not self._stop.done():
            addr = self.master_addr()
            if not addr:
                if await self._pause(min(backoff, 1.0)):
                    return
                continue
            try:
                await self._session(addr)
            except Exception:
                log.exception("HA session with %s failed", addr)
            self._proto = None
            self.connected_to = None
            if await self._pause(backoff):
                return

    async def _connect(self, addr: str) -> _SlaveProtocol | None:
        assert self._stop is not None
        try:
            host, port = parse_addr(addr)
        except ValueError as exc:
            log.error("bad HA master address %r: %s", addr, exc)
            return None
        loop = asyncio.get_running_loop()
        connecting = asyncio.ensure_future(
            loop.create_connection(lambda: _SlaveProtocol(self), host, port))
        waited: set[asyncio.Future[Any]] = {connecting, self._stop}
        done, _ = await asyncio.wait(waited, timeout=self.connect_timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        if connecting not in done:
            connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await connecting
            if not self._stop.done():
                log.warning("connect to HA master %s timed out", addr)
            return None
        try:
            _, proto = connecting.result()
        except OSError as exc:
            log.warning("cannot connect to HA master %s: %s", addr, exc.strerror or exc)
            return None
        return proto

    async def _session(self, addr: str) -> None:
        assert self._stop is not None
        proto = await self._connect(addr)
        if proto is None:
            return
        if self._stop.done():
            proto.close("HA client stopping")
            return
        self._proto = proto
        if addr != self._last_addr:  # another master: what the old one had says nothing
            self.master_max_offset_seen = 0
            self._last_addr = addr
        self.connected_to = addr
        log.info("connected to HA master %s; slave max offset %d", addr,
                 self.store.get_max_phy_offset())
        proto.report()
        tick = min(0.2, self.heartbeat_interval_ms / 2000, self.housekeeping_interval_ms / 2000)
        while not proto.lost.done() and not self._stop.done():
            await asyncio.wait({proto.lost, self._stop}, timeout=tick,
                               return_when=asyncio.FIRST_COMPLETED)
            now = now_ms()
            self._sample_rate(now)
            if now - proto.last_write_ms >= self.heartbeat_interval_ms:
                proto.report()
            if now - proto.last_read_ms > self.housekeeping_interval_ms:
                proto.close(f"nothing read for {now - proto.last_read_ms} ms "
                            f"(haHousekeepingInterval {self.housekeeping_interval_ms})")
        if not proto.lost.done():
            proto.close("HA client stopping")
            await asyncio.wait({proto.lost}, timeout=1.0)

    def _sample_rate(self, now: int) -> None:
        mark, count, rate = self._rate
        if now - mark >= 1000:
            rate = (self.bytes_read - count) * 1000 // (now - mark)
            self._rate = (now, self.bytes_read, rate)

    # ------------------------------------------------------------------ status

    def runtime_info(self) -> HAClientRuntimeInfo:
        proto = self._proto
        mine = self.store.get_max_phy_offset()
        seen = max(self.master_max_offset_seen, mine)
        loss = seen - mine
        return HAClientRuntimeInfo(
            master_addr=self.connected_to or self.master_addr(),
            transferred_byte_in_second=self._rate[2],
            max_offset=mine,
            last_read_timestamp=proto.last_read_ms if proto else 0,
            last_write_timestamp=proto.last_write_ms if proto else 0,
            master_flush_offset=0,
            is_activated=proto is not None and not proto.lost.done(),
            master_broker_addr=self.master_broker_addr,
            master_max_offset_seen=seen,
            estimated_loss_bytes=loss,
            estimated_loss_messages=messages_in(loss, average_record_size(self.store)),
            connection_age_ms=now_ms() - proto.created_ms if proto else 0,
            local_addr=proto.local_addr if proto and not proto.lost.done() else None,
        )

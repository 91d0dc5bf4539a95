"""`HAService`: the master side of replication — HA port, slaves, SYNC_MASTER waits, status.

How this works: an asyncio server on the HA port gives each slave an `HAConnection`.  A
sender with nothing to send sets the store's `on_append` hook; the next put calls it, which
wakes every idle sender and unsets it again, so new bytes go out without polling and puts
pay for the hook only while a sender waits.  A slave's report moves `push2slave_max_offset`
(the highest ack of any slave) and resolves the SYNC_MASTER waiters (a heap by offset) it
covers: `wait_acked(offset, timeout)` is 4.9.7's GroupTransferService without its 1 s
polling.  `replicate(result)` applies the
whole SYNC_MASTER rule to a put: SLAVE_NOT_AVAILABLE without a slave or with one more than
`fallbehind_max` bytes behind (the message stays stored), FLUSH_SLAVE_TIMEOUT when no ack
comes within the slave timeout.  A housekeeping tick (every `TICK_S`) closes slaves silent
for the housekeeping interval, samples transfer rates and keeps (time, max offset) samples
from which the lag of a slave in seconds is estimated.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import heapq
import itertools
import logging
from collections import deque
from collections.abc import Callable

from engine.ha.connection import HAConnection, now_ms
from engine.ha.status import HAConnectionInfo, average_record_size, messages_in
from engine.store.message_store import MessageStore
from engine.store.results import PutMessageResult, PutMessageStatus

log = logging.getLogger(__name__)

TICK_S = 0.2
SAMPLES = 3000  # 10 minutes of (time, max offset) samples at TICK_S


class HAService:
    """Accepts slaves on the HA port and tracks what they acknowledged."""

    def __init__(
        self,
        store: MessageStore,
        *,
        host: str = "0.0.0.0",
        port: int = 0,
        heartbeat_interval_ms: int = 5000,
        housekeeping_interval_ms: int = 20_000,
        transfer_batch_size: int = 32 * 1024,
        fallbehind_max: int = 256 * 1024 * 1024,
        accepting: Callable[[], bool] = lambda: True,
    ) -> None:
        self.store = store
        self.host = host
        self.requested_port = port
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.housekeeping_interval_ms = housekeeping_interval_ms
        self.transfer_batch_size = transfer_batch_size
        self.fallbehind_max = fallbehind_max
        self.accepting = accepting
        self.connections: list[HAConnection] = []
        self.push2slave_max_offset = 0
        #: Slaves that must acknowledge a SYNC_MASTER put (controller mode sets it from the
        #: SyncStateSet; 0: none).
        self.required_acks = 1
        #: With allAckInSyncStateSet: the connections (slave addresses) that must all
        #: acknowledge a put, the other SyncStateSet members' (None: count `required_acks`).
        self.required_slaves: frozenset[str] | None = None
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._seq = itertools.count()
        self._idle: list[HAConnection] = []
        self._server: asyncio.Server | None = None
        self._tick: asyncio.Task[None] | None = None
        self._stopping = False
        self._handlers: set[asyncio.Task[None]] = set()
        self._samples: deque[tuple[int, int]] = deque(maxlen=SAMPLES)
        self.port = 0

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Listen on the HA port and hook into the store's put path.

        Raises:
            OSError: the port cannot be bound.
        """
        self._stopping = False
        self._server = await asyncio.start_server(self._accept, self.host, self.requested_port,
                                                  reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        self._tick = asyncio.create_task(self._housekeeping(), name="ha-housekeeping")
        log.info("HA service listening on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        """Close the port and every slave connection; pending waits return False."""
        self._stopping = True
        if self.store.on_append == self.on_append:
            self.store.on_append = None
        if self._server is not None:
            self._server.close()
        self.close_all("HA service stopping")
        for handler in list(self._handlers):
            with contextlib.suppress(asyncio.CancelledError):
                await handler
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            self._server = None
        if self._tick is not None:
            self._tick.cancel()  # blocked in asyncio.sleep: a cancel is safe there
            with contextlib.suppress(asyncio.CancelledError):
                await self._tick
            self._tick = None
        self._fail_waiters()

    def close_all(self, reason: str) -> None:
        for conn in list(self.connections):
            conn.close(reason)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = HAConnection(self, reader, writer)
        if self._stopping or not self.accepting():
            log.warning("HA connection from %s refused: this broker is not a master", conn.addr)
            writer.close()
            return
        log.info("slave %s connected to the HA port", conn.addr)
        self.connections.append(conn)
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await conn.run()
        finally:
            self._handlers.discard(task)

    def connection_closed(self, conn: HAConnection) -> None:
        if conn in self.connections:
            self.connections.remove(conn)
        if conn in self._idle:
            self._idle.remove(conn)

    # ------------------------------------------------------------------ data and acks

    def on_append(self, end_offset: int, count: int) -> None:
        """The store's put hook, set while senders wait: wake them."""
        self.store.on_append = None
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.wakeup()

    def wait_for_data(self, conn: HAConnection) -> None:
        self._idle.append(conn)
        self.store.on_append = self.on_append

    def acked_offset(self) -> int:
        """The offset `required_acks` slaves have all acknowledged (any one slave's
        highest ack when it is 1, as 4.9.7); controller mode with allAckInSyncStateSet
        names the connections of every other member of the SyncStateSet: the lowest of
        their acks (-1 while one of them is not connected)."""
        named = self.required_slaves
        if named is not None:
            by_addr = {c.addr: c.slave_ack_offset for c in self.connections}
            return min((by_addr.get(addr, -1) for addr in named),
                       default=self.push2slave_max_offset)
        need = self.required_acks
        if need <= 1:
            return self.push2slave_max_offset
        acks = sorted((c.slave_ack_offset for c in self.connections), reverse=True)
        return acks[need - 1] if len(acks) >= need else -1

    def on_ack(self, offset: int) -> None:
        if offset > self.push2slave_max_offset:
            self.push2slave_max_offset = offset
        acked = self.acked_offset()
        waiters = self._waiters
        while waiters and waiters[0][0] <= acked:
            fut = heapq.heappop(waiters)[2]
            if not fut.done():
                fut.set_result(True)

    def is_slave_ok(self, master_put_where: int) -> bool:
        """4.9.7 `isSlaveOK`: a slave is connected and not too far behind."""
        return bool(self.connections) and (
            master_put_where - self.push2slave_max_offset < self.fallbehind_max)

    async def wait_acked(self, offset: int, timeout: float) -> bool:
        """True once `required_acks` slaves acknowledged every byte before `offset`, False
        on timeout."""
        if self.acked_offset() >= offset:
            return True
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        heapq.heappush(self._waiters, (offset, next(self._seq), fut))
        handle = loop.call_later(timeout, _expire, fut)
        try:
            return await fut
        finally:
            handle.cancel()

    def _fail_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for _, _, fut in waiters:
            if not fut.done():
                fut.set_result(False)

    async def replicate(self, result: PutMessageResult, timeout_ms: int) -> PutMessageResult:
        """Apply SYNC_MASTER to a stored put: wait for a slave's ack of its bytes."""
        if result.status not in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT):
            return result
        end = result.wrote_offset + result.wrote_bytes
        if self.required_acks == 0:  # controller mode: the master is its SyncStateSet alone
            return result
        if not self.is_slave_ok(end):
            return result._replace(status=PutMessageStatus.SLAVE_NOT_AVAILABLE,
                                   error_message="no slave connected, or the slave is more "
                                                 f"than {self.fallbehind_max} bytes behind")
        if await self.wait_acked(end, timeout_ms / 1000):
            return result
        return result._replace(status=PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
                               error_message=f"no slave acknowledged offset {end} within "
                                             f"slaveTimeout {timeout_ms} ms")

    # ------------------------------------------------------------------ housekeeping

    async def _housekeeping(self) -> None:
        while not self._stopping:
            await asyncio.sleep(TICK_S)
            now = now_ms()
            self._samples.append((now, self.store.get_max_phy_offset()))
            for conn in list(self.connections):
                conn.sample_rate()
                silent = now - conn.last_read_ms
                if silent > self.housekeeping_interval_ms:
                    conn.close(f"no report from the slave for {silent} ms "
                               f"(haHousekeepingInterval {self.housekeeping_interval_ms})")

    def reset_samples(self) -> None:
        """Forget the lag samples (the commit log was truncated)."""
        self._samples.clear()

    def seconds_behind(self, ack_offset: int) -> float:
        """How long ago this master's log went past `ack_offset` (0 if it did not): the
        time of that offset, interpolated between the (time, max offset) samples."""
        master_max = self.store.get_max_phy_offset()
        if ack_offset >= master_max:
            return 0.0
        now = now_ms()
        points = [*self._samples, (now, master_max)]
        i = bisect.bisect_right([p[1] for p in points], ack_offset)
        t1, o1 = points[i]
        if i == 0:
            return max(0, now - t1) / 1000  # older than every sample kept
        t0, o0 = points[i - 1]
        crossed = t0 + (ack_offset - o0) * (t1 - t0) / (o1 - o0)
        return max(0.0, now - crossed) / 1000

    def connection_infos(self) -> list[HAConnectionInfo]:
        master_max = self.store.get_max_phy_offset()
        avg = average_record_size(self.store)
        now = now_ms()
        out = []
        for conn in self.connections:
            ack = max(conn.slave_ack_offset, 0)
            diff = max(master_max - ack, 0)
            out.append(HAConnectionInfo(
                addr=conn.addr, slave_ack_offset=ack, diff=diff,
                in_sync=conn.slave_ack_offset >= 0 and diff < self.fallbehind_max,
                transferred_byte_in_second=conn.transferred_per_second,
                transfer_from_where=max(conn.next_transfer_from, 0),
                estimated_messages_behind=messages_in(diff, avg),
                estimated_seconds_behind=round(self.seconds_behind(ack), 3),
                connection_age_ms=now - conn.created_ms,
                last_ack_timestamp=conn.last_read_ms,
            ))
        return out


def _expire(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)

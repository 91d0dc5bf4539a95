"""One slave's connection on the master's HA port: read its reports, stream commit-log bytes.

How this works (4.9.7 `HAConnection`): the reader task decodes 8-byte reports; the first one
fixes where the transfer starts (a slave that reports 0 gets the master's last segment from
its beginning), every one is the slave's ack offset.  The writer task sends transfers of at
most `batch_size` bytes, all from one segment, while the master has bytes the slave has not
been sent; when there is nothing to send it waits for the store's next append (the service
resolves `wake`) or for the heartbeat interval, after which it sends an empty transfer.
Either task ending closes the connection; the service closes connections whose slave has
been silent for the housekeeping interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from engine.ha.wire import ReportDecoder, encode_transfer_header

if TYPE_CHECKING:
    from engine.ha.master import HAService

log = logging.getLogger(__name__)

READ_CHUNK = 1 << 20  # 4.9.7: the master's read buffer is 1 MiB


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class HAConnection:
    """A connected slave, as the master sees it."""

    def __init__(self, service: HAService, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.addr = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.created_ms = now_ms()
        self.last_read_ms = self.created_ms
        self.last_write_ms = self.created_ms
        self.slave_request_offset = -1  # the first report; -1 until it arrives
        self.slave_ack_offset = -1
        self.next_transfer_from = -1
        self.transferred = 0  # bytes of data sent
        self.transferred_per_second = 0
        self._rate_mark = (time.monotonic(), 0)
        self.closed = False
        self._wake: asyncio.Future[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def __repr__(self) -> str:
        return f"HAConnection({self.addr}, ack={self.slave_ack_offset})"

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        """Serve the slave until either side closes."""
        self._tasks = [asyncio.create_task(self._read_loop(), name=f"ha-read-{self.addr}"),
                       asyncio.create_task(self._write_loop(), name=f"ha-write-{self.addr}")]
        try:
            await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.close("connection ended")
            for task in self._tasks:
                task.cancel()  # tasks blocked in read/drain/a future, never in wait_for
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def close(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        log.info("HA connection of slave %s closed: %s", self.addr, reason)
        self.wakeup()
        with contextlib.suppress(Exception):
            self.writer.close()
        self.service.connection_closed(self)

    def wakeup(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    # ------------------------------------------------------------------ reports

    async def _read_loop(self) -> None:
        decoder = ReportDecoder()
        service = self.service
        while not self.closed:
            try:
                data = await self.reader.read(READ_CHUNK)
            except (ConnectionError, OSError) as exc:
                self.close(f"read failed: {exc}")
                return
            if not data:
                self.close("slave closed the connection")
                return
            self.last_read_ms = now_ms()
            reports = decoder.feed(data)
            if not reports:
                continue
            offset = reports[-1]
            master_max = service.store.get_max_phy_offset()
            if offset > master_max:
                self.close(f"slave offset {offset} is ahead of the master's max offset "
                           f"{master_max}: its commit log is not a copy of this one")
                return
            if self.slave_request_offset < 0:
                self.slave_request_offset = offset
                log.info("slave %s requests commit log from offset %d", self.addr, offset)
                self.wakeup()
            self.slave_ack_offset = offset
            service.on_ack(offset)

    # ------------------------------------------------------------------ transfers

    def _start_offset(self) -> int:
        request = self.slave_request_offset
        if request != 0:
            return request
        store = self.service.store
        max_offset = store.get_max_phy_offset()
        size = store.config.mapped_file_size_commit_log
        return max(max_offset - max_offset % size, store.get_min_phy_offset())

    async def _write_loop(self) -> None:
        service = self.service
        store = service.store
        writer = self.writer
        batch = service.transfer_batch_size
        heartbeat_ms = service.heartbeat_interval_ms
        while not self.closed:
            if self.next_transfer_from < 0:
                if self.slave_request_offset < 0:
                    await self._idle(heartbeat_ms / 1000)
                    continue
                self.next_transfer_from = self._start_offset()
            start = self.next_transfer_from
            data = store.read_commit_log(start, batch)
            if data is None:
                self.close(f"offset {start} is not in this master's commit log (min "
                           f"{store.get_min_phy_offset()}, max {store.get_max_phy_offset()})")
                return
            if not data and now_ms() - self.last_write_ms < heartbeat_ms:
                await self._idle((heartbeat_ms - (now_ms() - self.last_write_ms)) / 1000)
                continue
            writer.write(encode_transfer_header(start, len(data)))
            if data:
                writer.write(data)
                self.next_transfer_from = start + len(data)
                self.transferred += len(data)
            try:
                await writer.drain()
            except (ConnectionError, OSError) as exc:
                self.close(f"write failed: {exc}")
                return
            self.last_write_ms = now_ms()

    async def _idle(self, timeout: float) -> None:
        """Wait for new data, the first report, a close, or `timeout` seconds."""
        loop = asyncio.get_running_loop()
        wake = self._wake = loop.create_future()
        self.service.wait_for_data(self)
        handle = loop.call_later(max(timeout, 0.001), _resolve, wake)
        try:
            await wake
        finally:
            handle.cancel()
            self._wake = None

    def sample_rate(self) -> None:
        """Update `transferred_per_second` (called about every second by the service)."""
        now = time.monotonic()
        then, count = self._rate_mark
        if now - then >= 1.0:
            self.transferred_per_second = int((self.transferred - count) / (now - then))
            self._rate_mark = (now, self.transferred)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)

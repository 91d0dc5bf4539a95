"""`TraceDispatcher`: trace records queued by the hooks, sent in batches as trace messages.

How this works (Apache's `AsyncTraceDispatcher`): the hooks call `append`, which never waits:
a record goes into a bounded queue, or, when the queue is full, is dropped and counted.  One
asyncio task takes the records out, gathers up to `batch_records` of them (or 118 KB of
text) for at most `linger` seconds after the first, and sends them as one message to the
trace topic (`trace.encode_batch`: KEYS holds every traced message id and key) with its own
producer, group ``_INNER_TRACE_PRODUCER-<group>-<PRODUCER|CONSUMER>``, on the host's client
instance.  A send that fails is logged and counted; nothing reaches the business send.
`stop()` sends what is queued (waiting at most `flush_timeout`), then stops the task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from engine.client.message import Message
from engine.protocol.trace import (
    TRACE_GROUP_PREFIX,
    TRACE_TOPIC,
    TraceRecord,
    encode,
    encode_batch,
)

if TYPE_CHECKING:
    from engine.client.instance import ClientInstance

log = logging.getLogger(__name__)

QUEUE_SIZE = 1024  # AsyncTraceDispatcher's traceContextQueue
BATCH_RECORDS = 100  # its batchSize
BATCH_BYTES = 128_000 - 10_000  # its maxMsgSize less the margin it keeps
LINGER = 0.5  # s: its waitTimeThresholdMil
SEND_TIMEOUT_MS = 5000


class TraceDispatcher:
    """Queue and send the trace records of one producer or consumer group."""

    def __init__(self, instance: ClientInstance, group: str, role: str,
                 topic: str | None = None, *, queue_size: int = QUEUE_SIZE,
                 batch_records: int = BATCH_RECORDS, linger: float = LINGER,
                 flush_timeout: float = 5.0) -> None:
        from engine.client.producer import Producer, ProducerOptions

        self.topic = topic or TRACE_TOPIC
        self.batch_records = batch_records
        self.linger = linger
        self.flush_timeout = flush_timeout
        self.dropped = 0  # records refused by a full queue
        self.sent = 0  # records stored in the trace topic
        self.failed = 0  # records whose trace message could not be sent
        self._queue: asyncio.Queue[TraceRecord] = asyncio.Queue(queue_size)
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self.producer = Producer(
            f"{TRACE_GROUP_PREFIX}-{group}-{role}", instance=instance, register=False,
            options=ProducerOptions(send_msg_timeout=SEND_TIMEOUT_MS,
                                    max_message_size=128_000))

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def append(self, records: Iterable[TraceRecord]) -> None:
        """Queue records without waiting; a full queue drops them (counted in `dropped`)."""
        for record in records:
            try:
                self._queue.put_nowait(record)
            except asyncio.QueueFull:
                self.dropped += 1
                if self.dropped == 1 or self.dropped % 1000 == 0:
                    log.info("trace queue full: %d trace records dropped so far", self.dropped)
                continue
            self._idle.clear()

    async def start(self) -> None:
        if self.running:
            return
        await self.producer.start()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="trace-dispatch")

    async def flush(self) -> None:
        """Wait until every queued record has been sent (or failed)."""
        if self.running:
            await self._idle.wait()

    async def stop(self) -> None:
        """Send what is queued (for at most `flush_timeout`), then stop."""
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.flush(), self.flush_timeout)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        await self.producer.shutdown()
        if not self._queue.empty():
            log.warning("trace dispatcher stopped with %d records unsent", self._queue.qsize())

    async def _run(self) -> None:
        while True:
            if self._queue.empty():
                self._idle.set()
            batch = await self._collect()
            await self._send(batch)

    async def _collect(self) -> list[TraceRecord]:
        loop = asyncio.get_running_loop()
        first = await self._queue.get()
        batch = [first]
        size = len(encode(first))
        deadline = loop.time() + self.linger
        while len(batch) < self.batch_records and size < BATCH_BYTES:
            try:
                record = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    record = await asyncio.wait_for(self._queue.get(), remaining)
                except TimeoutError:
                    break
            batch.append(record)
            size += len(encode(record))
        return batch

    async def _send(self, batch: list[TraceRecord]) -> None:
        encoded = encode_batch(batch)
        try:
            await self.producer.send(Message(self.topic, encoded.body, keys=encoded.keys))
        except Exception as exc:  # a trace never fails the traced client
            self.failed += len(batch)
            log.warning("%d trace records not sent to %s: %s", len(batch), self.topic, exc)
        else:
            self.sent += len(batch)

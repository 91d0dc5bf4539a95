"""`TraceDispatcher`: trace records queued by the hooks, sent in batches as trace messages.

How this works (Apache's `AsyncTraceDispatcher`): the hooks call `append` (or
`append_encoded` with a record they encoded), which never waits: a record goes, encoded
(`trace.encode`), into a bounded queue with its message id and KEYS, or, when the queue is
full, is dropped and counted.  One asyncio task wakes when the queue stops being empty, waits
until `batch_records` records are queued or `linger` seconds have passed, and sends up to
that many (at most 118 KB of text, and as many as keep the KEYS property within its limit)
as one message to the trace topic (KEYS = every traced message id and key, the keys
`encode_batch` gives) with the producer it was given (`TraceSender`: the traced client's
`trace_producer`, group ``_INNER_TRACE_PRODUCER-<group>-<PRODUCER|CONSUMER>`` on its client
instance), so tracing needs no producer code of its own.  A send that fails is logged and
counted; nothing reaches the business send.  `stop()` sends what is queued (waiting at most
`flush_timeout`), then stops the task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Iterable
from typing import Protocol

from engine.client.core.message import Message
from engine.protocol.trace import (
    KEY_SEPARATOR,
    TRACE_GROUP_PREFIX,
    TRACE_TOPIC,
    TraceRecord,
    encode,
)

#: A record encoded (`trace.encode`, or as the Pub hook writes it), with its message id and
#: KEYS value (None without keys), from which `_take` makes its keys as `trace.keys_of` does.
Encoded = tuple[str, str, str | None]

log = logging.getLogger(__name__)

QUEUE_SIZE = 2048  # AsyncTraceDispatcher's queueSize (4.9) and traceContextQueue (5.x)
#: records of one trace message: 4.9.8 fills each to BATCH_BYTES (some 500-700 Pub records);
#: a trace message costs the client about as much whatever its size, so few large ones cost
#: a traced producer less than many small ones (batches of 100: ~1 us more CPU a send)
BATCH_RECORDS = 500
MAX_MESSAGE_SIZE = 128_000  # its maxMsgSize
BATCH_BYTES = MAX_MESSAGE_SIZE - 10_000  # less the margin it keeps
#: KEYS of one trace message, at most: its properties must stay within 32767 bytes
KEYS_BYTES = 30_000
LINGER = 0.5  # s: its waitTimeThresholdMil
SEND_TIMEOUT_MS = 5000
#: zlib level of a trace message's body (deflated from 4 KiB like any message's): any level
#: inflates alike, and trace text is so repetitive that level 1 deflates it nearly as well
#: as the default 5 (a batch of 100 Pub records: 716 bytes against 688) in half the time
COMPRESS_LEVEL = 1


class TraceSender(Protocol):
    """What a dispatcher sends its trace messages with (`engine.client.produce.producer`'s
    `trace_producer`)."""

    async def start(self) -> None: ...

    async def send(self, msg: Message) -> object: ...

    async def shutdown(self) -> None: ...


def trace_group(group: str, role: str) -> str:
    """The group of the producer that sends the traces of `group` in `role`."""
    return f"{TRACE_GROUP_PREFIX}-{group}-{role}"


class TraceDispatcher:
    """Queue and send the trace records of one producer or consumer group."""

    def __init__(self, producer: TraceSender, topic: str | None = None, *,
                 queue_size: int = QUEUE_SIZE, batch_records: int = BATCH_RECORDS,
                 linger: float = LINGER, flush_timeout: float = 5.0) -> None:
        self.producer = producer
        self.topic = topic or TRACE_TOPIC
        self.queue_size = queue_size
        self.batch_records = batch_records
        self.linger = linger
        self.flush_timeout = flush_timeout
        self.dropped = 0  # records refused by a full queue
        self.sent = 0  # records stored in the trace topic
        self.failed = 0  # records whose trace message could not be sent
        # a deque and two events rather than an asyncio.Queue: appending wakes the task once
        # per batch, not once per record
        self._queue: deque[Encoded] = deque()
        self._arrived = asyncio.Event()  # the queue is no longer empty
        self._full = asyncio.Event()  # a batch is waiting (or a flush wants everything)
        self._idle = asyncio.Event()  # nothing queued, nothing being sent
        self._idle.set()
        self._hurry = False
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def append(self, records: Iterable[TraceRecord]) -> None:
        """Queue records, encoded, without waiting; a full queue drops them (counted in
        `dropped`)."""
        for record in records:
            self.append_encoded(encode(record), record.msg_id, getattr(record, "keys", None))

    def append_encoded(self, text: str, msg_id: str, keys: str | None) -> None:
        """Queue one encoded record with its message id and KEYS value (its keys are split
        when its batch is taken): the cheap path of a traced send."""
        queue = self._queue
        queued = len(queue)
        if queued >= self.queue_size:
            self._drop()
            return
        queue.append((text, msg_id, keys))
        if queued == 0:
            self._idle.clear()
            self._arrived.set()
        if queued + 1 == self.batch_records:  # beyond it `_run` does not wait for `_full`
            self._full.set()

    def _drop(self) -> None:
        self.dropped += 1
        if self.dropped == 1 or self.dropped % 1000 == 0:
            log.info("trace queue full: %d trace records dropped so far", self.dropped)

    async def start(self) -> None:
        if self.running:
            return
        await self.producer.start()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="trace-dispatch")

    async def flush(self) -> None:
        """Send every queued record now and wait until they are sent (or failed)."""
        task = self._task
        if task is None or task.done():
            return
        self._hurry = True
        self._full.set()
        idle = asyncio.ensure_future(self._idle.wait())
        try:
            await asyncio.wait((idle, task), return_when=asyncio.FIRST_COMPLETED)
        finally:
            idle.cancel()
            self._hurry = False

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
        if self._queue:
            log.warning("trace dispatcher stopped with %d records unsent", len(self._queue))

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queue:
                self._idle.set()
                self._arrived.clear()
                await self._arrived.wait()
            if len(self._queue) < self.batch_records and not self._hurry:
                self._full.clear()
                # a timer rather than wait_for, which makes a task per batch
                timer = loop.call_later(self.linger, self._full.set)
                try:
                    await self._full.wait()
                finally:
                    timer.cancel()
            batch = self._take()
            if batch[0]:
                await self._send(batch)

    def _take(self) -> tuple[list[str], list[str]]:
        """Up to `batch_records` records, or 118 KB of them (the last one passing it), or as
        many as keep their keys within `KEYS_BYTES` (at least one), with those keys: each
        message id, then each of their KEYS (`_send` keeps each once)."""
        queue = self._queue
        count = min(len(queue), self.batch_records)
        if count == len(queue):  # the usual case: all of them, without a pop each
            taken = list(queue)
            queue.clear()
        else:
            popleft = queue.popleft
            taken = [popleft() for _ in range(count)]
        if not taken:
            return [], []
        texts = [t for t, _, _ in taken]
        if sum(map(len, texts)) >= BATCH_BYTES:
            size = end = 0
            while size < BATCH_BYTES:
                size += len(texts[end])
                end += 1
            queue.extendleft(reversed(taken[end:]))  # back in front, in their order
            del taken[end:], texts[end:]
        keys = _keys(taken)
        if len(taken) > 1 and len(KEY_SEPARATOR.join(keys).encode()) > KEYS_BYTES:
            size = end = 0  # rare (long keys): the records whose keys fit, at least one
            for _, msg_id, record_keys in taken:
                size += len(msg_id.encode()) + 1 + (len(record_keys.encode()) + 1
                                                     if record_keys else 0)
                if size > KEYS_BYTES:
                    break
                end += 1
            end = max(end, 1)
            queue.extendleft(reversed(taken[end:]))
            del taken[end:], texts[end:]
            keys = _keys(taken)
        return texts, keys

    async def _send(self, batch: tuple[list[str], list[str]]) -> None:
        texts, keys = batch
        body = "".join(texts).encode("utf-8")
        try:
            await self.producer.send(Message(self.topic, body, keys=list(dict.fromkeys(keys))))
        except Exception as exc:  # a trace never fails the traced client
            self.failed += len(texts)
            log.warning("%d trace records not sent to %s: %s", len(texts), self.topic, exc)
        else:
            self.sent += len(texts)


def _keys(taken: list[Encoded]) -> list[str]:
    """Each record's message id, then each of their KEYS (in that order)."""
    keys = [msg_id for _, msg_id, _ in taken]
    joined = KEY_SEPARATOR.join([k for _, _, k in taken if k])
    if joined:
        keys.extend(filter(None, joined.split(KEY_SEPARATOR)))
    return keys

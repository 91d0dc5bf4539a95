"""Idempotent consumption by business key: the key store interface and listener wrappers.

How this works: RocketMQ delivers at least once, so a consumer must deduplicate by a
business key (the message's KEYS), never by message id.  With ``dedupe=Dedupe(store)`` in
a consumer's options, every delivered message's key is *claimed* in a `KeyStore` before
the listener sees it:

- ``NEW``: nobody has consumed it in the window and nobody holds it now.  The claim takes a
  lease (CONSUMING, renewed while the listener runs); the listener's success marks the key
  CONSUMED for the window, any failure releases it.
- ``CONSUMED``: acknowledged without calling the listener.
- ``BUSY``: another delivery (this process or another consumer of the group) holds an
  unexpired lease: the message is retried later (RECONSUME_LATER through the retry topic
  for concurrent listeners, a suspended queue for orderly ones) instead of running twice.

An orderly consumer's queues claim the keys of their cached messages ahead of their turn
and record outcomes in batches (`dedupe_ahead.py`).

A consumer killed while consuming leaves its lease to expire, after which the key is
claimed again.  Messages without a key go to the listener unchanged.  The guarantee is
effectively-once only when the listener's effect and the CONSUMED record commit together
(`dedupe_sqlite.mark_consumed` in the application's own transaction); otherwise a crash
between the effect and the record means at-least-once (docs/client.md).
"""

from __future__ import annotations

import asyncio
import enum
import functools
import inspect
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from engine.client.core.message import MessageExt
from engine.client.core.results import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from engine.protocol.message import KEY_SEPARATOR, PROPERTY_KEYS

log = logging.getLogger(__name__)

DEFAULT_LEASE_MS = 60_000
_STATUSES = (ConsumeConcurrentlyStatus, ConsumeOrderlyStatus)


class Claim(enum.Enum):
    NEW = "new"  # claimed now: run the listener
    CONSUMED = "consumed"  # consumed already within the window: acknowledge, skip
    BUSY = "busy"  # another delivery holds it: retry later


class KeyStore(Protocol):
    """Where consumed keys are recorded; small enough to back with the application's DB."""

    def claim(self, group: str, keys: Sequence[str], owner: str,
              lease_ms: int) -> Awaitable[list[Claim]]:
        """One `Claim` per key, in order; NEW keys are now held by `owner` for `lease_ms`."""
        ...

    def finish(self, group: str, keys: Sequence[str], owner: str,
               consumed: bool) -> Awaitable[None]:
        """Mark `keys` CONSUMED for the window, or (consumed=False) release `owner`'s lease."""
        ...

    def renew(self, group: str, keys: Sequence[str], owner: str,
              lease_ms: int) -> Awaitable[None]:
        """Extend `owner`'s leases on `keys` (a listener still running)."""
        ...

    def close(self) -> Awaitable[None]: ...


KeyFunction = Callable[[MessageExt], "str | None"]


def first_key(msg: MessageExt) -> str | None:
    """The message's first KEYS entry (the default business key)."""
    text = msg.properties.get(PROPERTY_KEYS)
    if not text:
        return None
    if KEY_SEPARATOR not in text:
        return text
    keys = msg.keys
    return keys[0] if keys else None


def uniq_key(msg: MessageExt) -> str | None:
    """The producer's UNIQ_KEY (a producer retry that stored a message twice shares it)."""
    return msg.msg_id


@dataclass(frozen=True, slots=True)
class Dedupe:
    """Consumer option: ``ConsumerOptions(dedupe=Dedupe(SqliteKeyStore(path)))``."""

    store: KeyStore
    key: KeyFunction = first_key
    lease_ms: int = DEFAULT_LEASE_MS

    def __post_init__(self) -> None:
        if self.lease_ms <= 0:
            raise ValueError(f"lease_ms must be positive, got {self.lease_ms}")


def new_owner(client_id: str) -> str:
    """An owner name unique to one consumer instance (leases are per owner)."""
    return f"{client_id}@{os.getpid()}#{uuid.uuid4().hex[:12]}"


class Guard:
    """One consumer's claims, held leases (renewed) and batched CONSUMED records, shared by
    the consume services' filters (`claim_turns`, `dedupe_ahead`) and the wrappers below."""

    def __init__(self, dedupe: Dedupe, group: str, owner: str) -> None:
        self.dedupe = dedupe
        self.group = group
        self.owner = owner
        self._running: dict[str, int] = {}  # keys held: their leases are renewed
        self._renewer: asyncio.Future[None] | None = None
        self._closed = False
        self.prune: Callable[[], None] | None = None  # lets go of keys before each renewal
        self._recording: list[str] = []  # keys consumed since the event loop's last turn
        self._record: asyncio.Future[None] | None = None  # their record, to submit

    async def classify(self, msgs: Sequence[MessageExt]
                       ) -> list[tuple[MessageExt, str | None, Claim]]:
        """Claim every keyed message: (message, key, claim); a keyless message is NEW."""
        keyed = [(m, self.dedupe.key(m)) for m in msgs]
        keys = [k for _, k in keyed if k]
        claims = iter(await self.dedupe.store.claim(self.group, keys, self.owner,
                                                    self.dedupe.lease_ms) if keys else [])
        return [(m, k, next(claims) if k else Claim.NEW) for m, k in keyed]

    async def claim(self, msgs: Sequence[MessageExt]) -> tuple[list[MessageExt], list[str],
                                                              bool]:
        """(messages to run, keys now held, whether any key is busy elsewhere).  When a key
        is busy the held keys are already released again: the batch is retried whole."""
        classified = await self.classify(msgs)
        run = [m for m, _, c in classified if c is Claim.NEW]
        held = [k for _, k, c in classified if k and c is Claim.NEW]
        busy = any(c is Claim.BUSY for _, _, c in classified)
        if busy and held:
            await self.release(held)
            held = []
        return run, held, busy

    def key_of(self, msg: MessageExt) -> str | None:
        return self.dedupe.key(msg)

    def release(self, keys: Sequence[str]) -> Awaitable[None]:
        return self.dedupe.store.finish(self.group, keys, self.owner, False)

    def consumed(self, keys: Sequence[str]) -> Awaitable[None]:
        return self.dedupe.store.finish(self.group, keys, self.owner, True)

    def record_consumed(self, keys: Sequence[str]) -> asyncio.Future[None]:
        """The record of `keys` as CONSUMED, in one store operation with every other key
        recorded before the event loop's next turn (a run of listener calls)."""
        self._recording += keys
        record = self._record
        if record is None:
            loop = asyncio.get_running_loop()
            record = self._record = loop.create_future()
            record.add_done_callback(_logged)
            loop.call_soon(self.submit_records)
        return record

    def submit_records(self) -> None:
        """Hand the records of `record_consumed` to the store now (a claim made after them
        then sees them)."""
        record, self._record = self._record, None
        if record is None:
            return
        keys, self._recording = self._recording, []
        done = asyncio.ensure_future(self.consumed(keys))
        done.add_done_callback(functools.partial(_chain, record))

    async def run(self, listener: Callable[..., Any], msgs: list[MessageExt], ctx: Any,
                  held: Sequence[str]) -> Any:
        """Call the listener and await its outcome (`awaited`); a plain function's status
        needs no waiting: it has already run."""
        result = listener(msgs, ctx)
        if result is None or isinstance(result, _STATUSES) or not inspect.isawaitable(result):
            return result
        return await self.awaited(result, held)

    async def awaited(self, result: Awaitable[Any], held: Sequence[str]) -> Any:
        """A listener's awaitable `result`, awaited while `held` keys are renewed."""
        self.hold(held)
        try:
            return await result
        finally:
            self.unhold(held)

    def hold(self, keys: Iterable[str]) -> None:
        """Renew the leases of `keys` every half lease until as many `unhold` calls."""
        running = self._running
        for key in keys:
            running[key] = running.get(key, 0) + 1
        if self._renewer is None and running and not self._closed:
            self._renewer = asyncio.ensure_future(self._renew())

    def unhold(self, keys: Iterable[str]) -> None:
        running = self._running
        for key in keys:
            left = running.pop(key, 1) - 1
            if left:
                running[key] = left

    async def _renew(self) -> None:
        """Extend the leases of every key held until none is."""
        try:
            while self._running:
                await asyncio.sleep(self.dedupe.lease_ms / 2000)
                if self.prune is not None:
                    self.prune()
                if self._running:
                    await self.dedupe.store.renew(self.group, list(self._running), self.owner,
                                                  self.dedupe.lease_ms)
        except Exception:
            log.exception("%s: renewing consume leases failed", self.group)
        finally:
            self._renewer = None

    async def close(self) -> None:
        """Stop renewing (the consumer is shutting down)."""
        self._closed = True
        task, self._renewer = self._renewer, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


class Consuming:
    """``async with consumer.consuming(msgs)`` of a lite pull consumer: the keys polled are
    marked CONSUMED when the block ends normally, released when it raises."""

    def __init__(self, guard: Guard, msgs: Sequence[MessageExt]) -> None:
        self.guard = guard
        self.keys = [k for m in msgs if (k := guard.key_of(m))]

    async def __aenter__(self) -> Consuming:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: object) -> None:
        if exc_type is None:
            await self.guard.consumed(self.keys)
        else:
            await self.guard.release(self.keys)


OrderlyCall = Callable[[list[MessageExt], ConsumeOrderlyContext],
                       Awaitable[ConsumeOrderlyStatus | None]]
ConcurrentCall = Callable[[list[MessageExt], ConsumeConcurrentlyContext],
                          Awaitable[ConsumeConcurrentlyStatus | None]]
SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER


@dataclass(slots=True)
class Turn:
    """One concurrent consume request under `Dedupe`: the messages its listener gets (`new`,
    NEW and keyless, in order), or the status it gets without the listener (`status`: every
    key consumed already, CONSUME_SUCCESS; a key busy elsewhere, RECONSUME_LATER)."""

    guard: Guard
    msgs: list[MessageExt]
    new: list[tuple[MessageExt, str | None]]
    status: ConsumeConcurrentlyStatus | None = None
    whole: bool = True  # the listener gets every message of the request
    held: bool = False  # its keys' leases are renewed (`hold`)

    def hold(self) -> None:
        """Renew the keys' leases until `record` (a listener waiting for a slot, running)."""
        self.held = True
        self.guard.hold([k for _, k in self.new if k])

    def listener_msgs(self) -> list[MessageExt]:
        return self.msgs if self.whole else [m for m, _ in self.new]

    def context(self, ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyContext:
        """The listener's context: the request's own when it sees all of its messages."""
        return ctx if self.whole else ConsumeConcurrentlyContext(ctx.message_queue)

    def record(self, status: Any, ctx: ConsumeConcurrentlyContext,
               inner: ConsumeConcurrentlyContext) -> asyncio.Future[None] | None:
        """The listener's outcome: the keys of the messages it acknowledged (up to `inner`'s
        ack_index) are recorded CONSUMED, the others released; `ctx` (the request's) takes
        `inner`'s delay level and acknowledges up to the same message.  Returns the CONSUMED
        record, to await before acknowledging anything."""
        new = self.new
        if self.held:
            self.held = False
            self.guard.unhold([k for _, k in new if k])
        if len(new) == 1 and inner is ctx:  # the usual request: one message
            key = new[0][1]
            if key is None:
                return None
            if status is SUCCESS and inner.ack_index >= 0:
                return self.guard.record_consumed([key])
            asyncio.ensure_future(self.guard.release([key])).add_done_callback(_logged)
            return None
        ok = min(inner.ack_index, len(new) - 1) + 1 if status is SUCCESS else 0
        if inner is not ctx:
            ctx.delay_level_when_next_consume = inner.delay_level_when_next_consume
            if status is SUCCESS and ok < len(new):  # acknowledged up to its last ok message
                last = new[ok - 1][0] if ok else None
                ctx.ack_index = next((j for j, m in enumerate(self.msgs) if m is last), -1)
        released = [k for _, k in new[ok:] if k]
        if released:
            asyncio.ensure_future(self.guard.release(released)).add_done_callback(_logged)
        consumed = [k for _, k in new[:ok] if k]
        return self.guard.record_consumed(consumed) if consumed else None


async def claim_turns(guard: Guard, batches: Sequence[list[MessageExt]]) -> list[Turn]:
    """The consume requests of one pull (`batches`), their keys claimed in one store
    operation: a request with a BUSY key is retried whole (its NEW keys released), one whose
    keys were all CONSUMED is acknowledged without the listener, any other goes to the
    listener with its NEW messages."""
    classified = await guard.classify([m for msgs in batches for m in msgs])
    turns: list[Turn] = []
    released: list[str] = []
    at = 0
    for msgs in batches:
        n = len(msgs)
        if n == 1:  # the usual request (consume_message_batch_max_size = 1)
            m, key, claim = classified[at]
            at += 1
            if claim is not Claim.NEW:
                turns.append(Turn(guard, msgs, [], SUCCESS if claim is Claim.CONSUMED
                                  else LATER))
                continue
            new = [(m, key)]
        else:
            part = classified[at:at + n]
            at += n
            new = [(m, k) for m, k, c in part if c is Claim.NEW]
            if any(c is Claim.BUSY for _, _, c in part):
                released += [k for _, k in new if k]
                turns.append(Turn(guard, msgs, [], LATER))
                continue
            if not new:
                turns.append(Turn(guard, msgs, [], SUCCESS))
                continue
        turns.append(Turn(guard, msgs, new, None, len(new) == n))
    if released:
        asyncio.ensure_future(guard.release(released)).add_done_callback(_logged)
    return turns


def concurrently(listener: Callable[..., Any], guard: Guard) -> ConcurrentCall:
    """A concurrent listener that runs each business key once, claiming and recording around
    each call (`consume_directly`; the consume service claims a pull's keys together)."""

    async def deduplicated(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                           ) -> ConsumeConcurrentlyStatus | None:
        (turn,) = await claim_turns(guard, [msgs])
        if turn.status is not None:
            return turn.status
        inner = turn.context(ctx)
        try:
            status = listener(turn.listener_msgs(), inner)
            if inspect.isawaitable(status):
                turn.hold()
                status = await status
        except BaseException:
            turn.record(LATER, ctx, inner)
            raise
        record = turn.record(status, ctx, inner)
        if record is not None:
            await record
        return status if isinstance(status, ConsumeConcurrentlyStatus) else None

    return deduplicated


def _chain(target: asyncio.Future[None], source: asyncio.Future[Any]) -> None:
    if target.done():
        return
    if source.cancelled():
        target.cancel()
    elif (exc := source.exception()) is not None:
        target.set_exception(exc)
    else:
        target.set_result(None)


def _logged(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("recording consume outcomes failed (the leases expire): %s",
                    future.exception())


def orderly(listener: Callable[..., Any], guard: Guard) -> OrderlyCall:
    """An orderly listener that runs each business key once, claiming and finishing around
    each call (`consume_directly`; the orderly service's queues claim ahead instead,
    dedupe_ahead.py)."""
    suspend = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT

    async def deduplicated(msgs: list[MessageExt], ctx: ConsumeOrderlyContext
                           ) -> ConsumeOrderlyStatus | None:
        run, held, busy = await guard.claim(msgs)
        if busy:
            return suspend
        if not run:
            return ConsumeOrderlyStatus.SUCCESS
        try:
            status = await guard.run(listener, run, ctx, held)
        except Exception:
            log.exception("%s: orderly listener raised on %d messages", guard.group, len(run))
            status = suspend
        if isinstance(status, ConsumeOrderlyStatus) and status is not suspend:
            await guard.consumed(held)
        else:
            await guard.release(held)
        return status if isinstance(status, ConsumeOrderlyStatus) else None

    return deduplicated

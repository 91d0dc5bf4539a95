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
import inspect
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from engine.client.message import MessageExt
from engine.client.results import (
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
Slots = asyncio.Semaphore | None  # a consumer's listener slots (consume_thread_max)


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
    """The claim / run / finish cycle of one consumer, shared by the wrappers below."""

    def __init__(self, dedupe: Dedupe, group: str, owner: str) -> None:
        self.dedupe = dedupe
        self.group = group
        self.owner = owner
        self._running: dict[str, int] = {}  # keys held: their leases are renewed
        self._renewer: asyncio.Future[None] | None = None
        self._closed = False
        self.prune: Callable[[], None] | None = None  # lets go of keys before each renewal

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

    async def run(self, listener: Callable[..., Any], msgs: list[MessageExt], ctx: Any,
                  held: Sequence[str]) -> Any:
        """Call the listener and await its outcome (`awaited`); a plain function's status
        needs no waiting: it has already run."""
        result = listener(msgs, ctx)
        if result is None or isinstance(result, _STATUSES) or not inspect.isawaitable(result):
            return result
        return await self.awaited(result, held)

    async def awaited(self, result: Awaitable[Any], held: Sequence[str],
                      slots: Slots = None) -> Any:
        """A listener's awaitable `result`, awaited holding one of `slots` (the consumer's
        listener slots, when given) while `held` keys are renewed every half lease."""
        self.hold(held)
        try:
            if slots is None:
                return await result
            async with slots:
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
Request = tuple[list[MessageExt], ConsumeConcurrentlyContext]  # one listener call's share


async def consume_concurrently(listener: Callable[..., Any], guard: Guard,
                               requests: Sequence[Request], slots: Slots = None
                               ) -> list[ConsumeConcurrentlyStatus | None]:
    """The consume requests of one pull, each business key run once; a status per request.

    Every key is claimed in one store operation.  A request with a BUSY key is retried whole
    (RECONSUME_LATER, its NEW keys released); one whose keys were all CONSUMED is
    acknowledged without the listener; any other calls the listener with its NEW messages
    (a coroutine listener holding one of `slots`, the consume service's: the store's waits
    never keep a slot from another message).  The keys of the messages acknowledged (up to
    the context's ack_index) are then recorded CONSUMED and the others released, all in one
    flush, before the caller acknowledges anything."""
    success = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    later = ConsumeConcurrentlyStatus.RECONSUME_LATER
    classified = await guard.classify([m for msgs, _ in requests for m in msgs])
    statuses: list[Any] = []
    ran: list[tuple[int, list[tuple[MessageExt, str | None]], ConsumeConcurrentlyContext]] = []
    waiting: list[tuple[int, Awaitable[Any], Awaitable[Any]]] = []  # (request, call, wait)
    released: list[str] = []
    at = 0
    for i, (msgs, ctx) in enumerate(requests):
        n = len(msgs)
        if n == 1:  # the usual request (consume_message_batch_max_size = 1)
            m, key, claim = classified[at]
            at += 1
            if claim is not Claim.NEW:
                statuses.append(success if claim is Claim.CONSUMED else later)
                continue
            new = [(m, key)]
        else:
            part = classified[at:at + n]
            at += n
            new = [(m, k) for m, k, c in part if c is Claim.NEW]
            if any(c is Claim.BUSY for _, _, c in part):
                released += [k for _, k in new if k]
                statuses.append(later)
                continue
            if not new:
                statuses.append(success)
                continue
        # The listener gets the request's own context when it sees all of its messages.
        inner = ctx if len(new) == n else ConsumeConcurrentlyContext(ctx.message_queue)
        try:
            status = listener(msgs if inner is ctx else [m for m, _ in new], inner)
            if (status is not None and not isinstance(status, _STATUSES)
                    and inspect.isawaitable(status)):
                waiting.append((i, status, guard.awaited(status, [k for _, k in new if k],
                                                         slots)))
        except Exception:
            log.exception("%s: listener raised on %d messages", guard.group, len(new))
            status = later
        statuses.append(status)
        ran.append((i, new, inner))
    if waiting:
        try:
            outcomes = await asyncio.gather(*(w for _, _, w in waiting),
                                            return_exceptions=True)
        finally:  # cancelled (shutdown): close the listener coroutines that never started
            for _, call, _ in waiting:
                if (inspect.iscoroutine(call)
                        and inspect.getcoroutinestate(call) == inspect.CORO_CREATED):
                    call.close()
        for (i, _, _), outcome in zip(waiting, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                log.error("%s: listener raised on %d messages", guard.group,
                          len(requests[i][0]), exc_info=outcome)
                outcome = later
            statuses[i] = outcome
    consumed: list[str] = []
    for i, new, inner in ran:
        status = statuses[i]
        ok = min(inner.ack_index, len(new) - 1) + 1 if status is success else 0
        consumed += [k for _, k in new[:ok] if k]
        released += [k for _, k in new[ok:] if k]
        msgs, ctx = requests[i]
        if inner is not ctx:
            ctx.delay_level_when_next_consume = inner.delay_level_when_next_consume
            if status is success and ok < len(new):  # acknowledged up to its last ok message
                last = new[ok - 1][0] if ok else None
                ctx.ack_index = next((j for j, m in enumerate(msgs) if m is last), -1)
        if not isinstance(status, ConsumeConcurrentlyStatus):
            statuses[i] = None
    finishing = ([guard.consumed(consumed)] if consumed else []) + (
        [guard.release(released)] if released else [])
    if finishing:
        await asyncio.gather(*finishing)  # submitted together: one flush
    return statuses


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

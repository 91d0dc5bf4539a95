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
from collections.abc import Awaitable, Callable, Sequence
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
        self._running: dict[str, int] = {}  # keys held by listeners waiting or running
        self._renewer: asyncio.Future[None] | None = None

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
                  held: Sequence[str], slots: Slots = None) -> Any:
        """Call the listener and, when it returns an awaitable, await it holding one of
        `slots` (the consumer's listener slots) while `held` keys are renewed every half
        lease.  A plain function's status needs neither: it has already run."""
        result = listener(msgs, ctx)
        if result is None or isinstance(result, _STATUSES) or not inspect.isawaitable(result):
            return result
        return await self.awaited(result, held, slots)

    async def awaited(self, result: Awaitable[Any], held: Sequence[str],
                      slots: Slots = None) -> Any:
        """A listener's awaitable `result`, awaited as `run` says."""
        self.hold(held)
        try:
            if slots is None:
                return await result
            async with slots:
                return await result
        finally:
            self.drop(held)

    def hold(self, keys: Sequence[str]) -> None:
        """Renew `keys` every half lease until `drop` (a listener waits or runs)."""
        running = self._running
        for key in keys:
            running[key] = running.get(key, 0) + 1
        if self._renewer is None and keys:
            self._renewer = asyncio.ensure_future(self._renew())

    def drop(self, keys: Sequence[str]) -> None:
        running = self._running
        for key in keys:
            left = running.pop(key) - 1
            if left:
                running[key] = left

    async def _renew(self) -> None:
        """Extend the leases of every key whose listener still runs, until none does."""
        try:
            while self._running:
                await asyncio.sleep(self.dedupe.lease_ms / 2000)
                if self._running:
                    await self.dedupe.store.renew(self.group, list(self._running), self.owner,
                                                  self.dedupe.lease_ms)
        except Exception:
            log.exception("%s: renewing consume leases failed", self.group)
        finally:
            self._renewer = None

    async def close(self) -> None:
        """Stop renewing (the consumer is shutting down)."""
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


ConcurrentCall = Callable[[list[MessageExt], ConsumeConcurrentlyContext],
                          Awaitable[ConsumeConcurrentlyStatus | None]]
OrderlyCall = Callable[[list[MessageExt], ConsumeOrderlyContext],
                       Awaitable[ConsumeOrderlyStatus | None]]


def concurrently(listener: Callable[..., Any], guard: Guard,
                 slots: Slots = None) -> ConcurrentCall:
    """A concurrent listener that runs each business key once.

    With `slots` (the consume service's), a coroutine listener runs holding one of them, and
    only then: the store's claim and finish never keep a slot from another message, so a
    consumer's throughput is not its slot count over two store transactions."""
    success = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    later = ConsumeConcurrentlyStatus.RECONSUME_LATER

    store, group, owner = guard.dedupe.store, guard.group, guard.owner
    key_of, lease_ms = guard.dedupe.key, guard.dedupe.lease_ms

    async def deduplicated(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                           ) -> ConsumeConcurrentlyStatus | None:
        if len(msgs) == 1 and (key := key_of(msgs[0])):
            # the usual case (consume_message_batch_max_size = 1), without the bookkeeping
            keys = (key,)
            (claim,) = await store.claim(group, keys, owner, lease_ms)
            if claim is not Claim.NEW:
                return success if claim is Claim.CONSUMED else later
            try:
                status = listener(msgs, ctx)
                if (status is not None and not isinstance(status, _STATUSES)
                        and inspect.isawaitable(status)):
                    status = await guard.awaited(status, keys, slots)
            except Exception:
                log.exception("%s: listener raised on a message", group)
                status = later
            await store.finish(group, keys, owner, status is success and ctx.ack_index >= 0)
            return status if isinstance(status, ConsumeConcurrentlyStatus) else None
        run, held, busy = await guard.claim(msgs)
        if busy:
            return later
        if not run:
            return success
        inner = ConsumeConcurrentlyContext(ctx.message_queue)
        try:
            status = await guard.run(listener, run, inner, held, slots)
        except Exception:
            log.exception("%s: listener raised on %d messages", guard.group, len(run))
            status = later
        ok = run[:min(inner.ack_index, len(run) - 1) + 1] if status is success else []
        ok_keys = {k for m in ok if (k := guard.key_of(m))}
        done = [k for k in held if k in ok_keys]
        failed = [k for k in held if k not in ok_keys]
        if done:
            await guard.consumed(done)
        if failed:
            await guard.release(failed)
        ctx.delay_level_when_next_consume = inner.delay_level_when_next_consume
        if status is success and len(ok) < len(run):
            ctx.ack_index = next(i for i, m in enumerate(msgs) if m is ok[-1]) if ok else -1
        return status if isinstance(status, ConsumeConcurrentlyStatus) else None

    return deduplicated


def orderly(listener: Callable[..., Any], guard: Guard) -> OrderlyCall:
    """An orderly listener that runs each business key once."""
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

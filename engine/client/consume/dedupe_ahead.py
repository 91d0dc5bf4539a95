"""Orderly consumption under `Dedupe`: a queue's cached messages claimed ahead of their turn.

How this works: an orderly queue runs one listener call after the other, so a claim and a
finish awaited around each call (two store transactions, about 4.5 ms with the store's
batching wait) would bound a queue to a few hundred calls a second.  Instead the keys of the
messages a pull caches are claimed in one store operation as they arrive (`QueueKeys.pulled`),
while the queue consumes earlier ones, and at a message's turn (`turn`) its claim is known:

- NEW: held by this consumer (the lease renewed while held); the message goes to the
  listener through the consume service's normal path;
- CONSUMED: skipped, as if the listener had succeeded on it;
- BUSY when claimed ahead, or the key held by an earlier message of the same queue: claimed
  again at its turn, when the earlier outcome is known; still BUSY suspends the queue.
  Messages with the same key in one listener call follow the first one's outcome.

After the call (`finished`): success records the NEW keys CONSUMED in the store's next batch
(not awaited); a failed call (SUSPEND, None, an exception) keeps its keys held, since the
queue retries the same messages; messages sent to the retry topic after their last
reconsume release theirs.  The queue's offset moves past a message only once its CONSUMED
record is durable: `commit` applies offsets in order, each behind the finishes submitted
before it.  A finish that fails drops the queue, so it is pulled again from its last
durable offset (the keys' leases expire: at least once).  A dropped queue (`drop`) releases
the keys claimed for messages that have not reached the listener.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.client.consume.dedupe import Claim, Guard
from engine.client.consume.process_queue import ProcessQueue
from engine.client.core.message import MessageExt

log = logging.getLogger(__name__)

Ask = None  # a claim to make at the message's turn
Entry = tuple[str, "Claim | None"]  # (key, claim) of one cached keyed message


@dataclass(slots=True)
class _Pending:
    """One claim-ahead operation: the offsets and keys it claims, in order."""

    offsets: list[int]
    keys: list[str]
    future: asyncio.Future[list[Claim]]
    applied: bool = field(default=False)


class QueueKeys:
    """The claims of one orderly process queue's keyed messages, from pull to commit."""

    def __init__(self, guard: Guard, pq: ProcessQueue, commit: Callable[[int], None],
                 failed: Callable[[], None]) -> None:
        self.guard = guard
        self.pq = pq
        self._commit = commit  # moves the queue's offset
        self._failed = failed  # a finish failed: the queue is dropped
        self.entries: dict[int, Entry] = {}  # queue offset -> key, claim (None: ask)
        self.waiting: dict[int, _Pending] = {}  # queue offset -> its claim under way
        self.held: dict[str, int] = {}  # key -> entries of this queue naming it
        self.running: set[int] = set()  # offsets handed to the listener, outcome pending
        self.commits: collections.deque[tuple[asyncio.Future[None] | None, int]] = (
            collections.deque())
        self.dropped = False

    # ------------------------------------------------------------------ claims

    def pulled(self, msgs: Sequence[MessageExt]) -> None:
        """Claim the keys of newly cached messages, all in one store operation; a key
        already named by this queue is claimed at its message's turn instead."""
        if self.dropped:
            return
        offsets: list[int] = []
        keys: list[str] = []
        entries, held = self.entries, self.held
        for m in msgs:
            offset = m.queue_offset
            if offset in entries or offset in self.waiting:
                continue
            key = self.guard.key_of(m)
            if key is None:
                continue
            if key in held:
                held[key] += 1
                entries[offset] = (key, Ask)
                continue
            held[key] = 1
            offsets.append(offset)
            keys.append(key)
        if not keys:
            return
        future = asyncio.ensure_future(self.guard.dedupe.store.claim(
            self.guard.group, keys, self.guard.owner, self.guard.dedupe.lease_ms))
        pending = _Pending(offsets, keys, future)
        for offset in offsets:
            self.waiting[offset] = pending
        future.add_done_callback(lambda _: self._apply(pending))

    def _apply(self, pending: _Pending) -> None:
        """Record a claim-ahead's answers (once; at its turn or when it completes)."""
        if pending.applied:
            return
        pending.applied = True
        future = pending.future
        failed = future.cancelled() or future.exception() is not None
        if failed and not future.cancelled():
            log.warning("%s: claiming %d keys ahead failed (claimed at their turn): %s",
                        self.guard.group, len(pending.keys), future.exception())
        claims: Sequence[Claim | None] = (
            [Ask] * len(pending.keys) if failed else future.result())
        new: list[str] = []
        for offset, key, claim in zip(pending.offsets, pending.keys, claims, strict=True):
            self.waiting.pop(offset, None)
            if claim is Claim.NEW:
                new.append(key)
            self.entries[offset] = (key, Claim.CONSUMED if claim is Claim.CONSUMED
                                    else Claim.NEW if claim is Claim.NEW else Ask)
        self.guard.hold(new)
        if self.dropped:
            self.drop()

    async def turn(self, msgs: Sequence[MessageExt]) -> tuple[list[MessageExt], bool]:
        """(the messages the listener gets, whether a key is busy: suspend the queue)."""
        pendings = {id(p): p for m in msgs if (p := self.waiting.get(m.queue_offset))}
        for pending in pendings.values():
            if not pending.future.done():
                await asyncio.wait([pending.future])
            self._apply(pending)
        if self.dropped:
            return [], True
        entries = self.entries
        ask: dict[str, int] = {}
        firsts: set[str] = set()
        for m in msgs:
            entry = entries.get(m.queue_offset)
            if entry is None:  # keyless, or (never by the service) not claimed ahead
                key = self.guard.key_of(m)
                if key is None:
                    continue
                entry = entries[m.queue_offset] = (key, Ask)
                self.held[key] = self.held.get(key, 0) + 1
            key, claim = entry
            if key not in firsts:
                firsts.add(key)
                if claim is Ask:
                    ask[key] = m.queue_offset
        busy = False
        if ask:
            self.guard.submit_records()  # the outcomes before this turn first: they decide it
            g = self.guard
            claims = await g.dedupe.store.claim(g.group, list(ask), g.owner, g.dedupe.lease_ms)
            new = []
            for (key, offset), claim in zip(ask.items(), claims, strict=True):
                if claim is Claim.BUSY:
                    busy = True
                    continue
                entries[offset] = (key, claim)
                if claim is Claim.NEW:
                    new.append(key)
            g.hold(new)
            if self.dropped:
                self.drop()
        if busy or self.dropped:
            return [], True
        run: list[MessageExt] = []
        firsts.clear()
        for m in msgs:
            entry = entries.get(m.queue_offset)
            if entry is None:
                run.append(m)
                continue
            key, claim = entry
            if key not in firsts:
                firsts.add(key)
                if claim is Claim.NEW:
                    run.append(m)
        self.running.update(m.queue_offset for m in run)
        return run, False

    # ------------------------------------------------------------------ outcomes

    def finished(self, msgs: Sequence[MessageExt], consumed: bool, again: bool
                 ) -> asyncio.Future[None] | None:
        """The outcome of `msgs`' turn: `consumed` records their NEW keys CONSUMED (the
        future of that record); otherwise `again` keeps them held for the next try, or
        their keys are released (the messages went to the retry topic)."""
        for m in msgs:
            self.running.discard(m.queue_offset)
        if not consumed and again:
            return None
        done: list[str] = []
        for m in msgs:
            entry = self.entries.pop(m.queue_offset, None)
            if entry is None:
                continue
            key, claim = entry
            left = self.held.pop(key, 1) - 1
            if left:
                self.held[key] = left
            if claim is Claim.NEW:
                done.append(key)
        if not done:
            return None
        self.guard.unhold(done)
        if consumed:
            return self.guard.record_consumed(done)
        g = self.guard
        future = asyncio.ensure_future(g.dedupe.store.finish(g.group, done, g.owner, False))
        future.add_done_callback(_log_failure)
        return None

    def commit(self, offset: int, record: asyncio.Future[None] | None) -> None:
        """Move the queue's offset to `offset` once `record` and every record before it
        are durable."""
        if record is None and not self.commits:
            self._commit(offset)
            return
        commits = self.commits
        if record is not None and commits and commits[-1][0] is record:
            commits[-1] = (record, offset)  # one more call behind the same record
        elif record is not None:
            commits.append((record, offset))
            record.add_done_callback(lambda _: self._drain())
        else:
            commits.append((record, offset))
            self._drain()

    def _drain(self) -> None:
        commits = self.commits
        offset = -1
        while commits:
            record, at = commits[0]
            if record is not None:
                if not record.done():
                    break
                if record.cancelled() or record.exception() is not None:
                    log.error("%s: recording consumed keys failed; the queue is pulled again "
                              "from its last recorded offset: %s", self.guard.group,
                              "cancelled" if record.cancelled() else record.exception())
                    commits.clear()
                    self._failed()
                    return
            commits.popleft()
            offset = at
        if offset >= 0:
            self._commit(offset)

    def drop(self) -> None:
        """The queue is gone: release the keys of messages that have not reached the
        listener (those running are finished by their outcome)."""
        self.dropped = True
        idle: list[str] = []
        for offset, (key, claim) in list(self.entries.items()):
            if offset in self.running:
                continue
            del self.entries[offset]
            if claim is Claim.NEW:
                idle.append(key)
        self.held.clear()
        if idle:
            self.guard.unhold(idle)
            g = self.guard
            future = asyncio.ensure_future(g.dedupe.store.finish(g.group, idle, g.owner, False))
            future.add_done_callback(_log_failure)


def _log_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("recording consume outcomes failed (the leases expire): %s",
                    future.exception())


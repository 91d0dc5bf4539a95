"""Sampling every consumer group's queues once per cycle: offsets, lag, time lag, rates.

How this works: one name-server round (cluster info and the topic list) names the brokers,
and the groups are every broker's subscription groups (one GET_ALL_SUBSCRIPTIONGROUP_CONFIG
a broker) with those the retry topics name (a 5.x POP group has no ``%RETRY%<group>`` topic,
by which Apache's consumerProgress lists groups; its POP retry topics are its own).
Then each group's consume stats are read from each broker, one GET_CONSUME_STATS per group
per broker, at most `concurrency` requests in flight.  A group x broker that fails is a
`Gap`, never a zero; so is a pair sampled before whose broker has left the name servers'
tables (and, when no name server answers, every pair sampled before).  The lag in time
needs the store time of the oldest unconsumed message: it is pulled (one message, group
TOOLS_CONSUMER, nothing committed) only for queues with lag, and cached by (queue,
offset), so a stuck group costs one read, not one per cycle.  Rates are offset deltas
against the same queue's previous sample.  For groups with lag whose offset did not move,
one GET_CONSUMER_LIST_BY_GROUP tells whether consumers are online (they still commit, so
the commit time advances) or gone (it does not): the verdict's STOP rule reads that
commit time.  A POP group's queues also carry the broker's pull offset (5.3's way): the
messages between the committed offset and it are in flight (taken, not acked yet), and
a pull offset that moved is the consumers' work as much as a committed offset that moved.

A caller that has read the brokers' GET_BROKER_CONSUME_STATS and the groups' clients
already (the dashboard's Consumer groups screen, every refresh) hands them in as `Known`:
the cycle then takes each (group, broker) from that answer and the online groups from the
clients read, and asks per group only what the broker-wide answer lacks: Apache's brokers
leave the pull offset (a POP group's in flight) out of it, so groups that pop (gRPC or POP
clients online, or a pull offset above the committed one seen before) are still read one
by one, and so is a rotating slice of the others (a remoting POP consumer says nothing of
its popping), pairs the broker-wide answer did not cover, and brokers that did not answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import ClientError, ServerSystemError
from engine.client.core.results import PullStatus
from engine.protocol.body.admin import OffsetWrapper
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.codes import RequestCode
from engine.protocol.group_topics import is_system_group
from engine.protocol.header.broker import GetConsumeStatsRequestHeader
from engine.protocol.wire import to_ext
from mqadmin.operations.lag.model import Cycle, Gap, QueueKey, QueueSample
from mqadmin.operations.stats_bodies import decode_consume_stats
from mqadmin.operations.targets import consumer_groups, masters

#: Requests in flight at once, by default.
CONCURRENCY = 32
#: With `Known`, each cycle also reads one group in this many one by one (see above).
SWEEP = 20
#: Groups every RocketMQ broker has for its own tools: never sampled.
SYSTEM_GROUPS = frozenset({"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER",
                           "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_OWNER",
                           "CID_ONSAPI_PERMISSION", "CID_ONSAPI_PULL"})
Errors = (ClientError, TimeoutError, OSError)


def now_ms() -> int:
    return int(time.time() * 1000)


async def consume_stats(admin: MQAdmin, addr: str, group: str
                        ) -> dict[MessageQueue, OffsetWrapper]:
    """GET_CONSUME_STATS of `group` on the broker at `addr` (every topic it has offsets
    for), as `BrokerAdmin.consume_stats` with the quick decoder.

    Raises:
        ClientError: as `BrokerAdmin.consume_stats`.
    """
    header = GetConsumeStatsRequestHeader(group, None)
    resp = await admin.broker._call(addr, RequestCode.GET_CONSUME_STATS, to_ext(header),
                                    timeout=admin.broker.relayed_timeout)
    return decode_consume_stats(resp.body, addr)


@dataclass(frozen=True, slots=True)
class Oldest:
    """The oldest unconsumed message of a queue: when it was stored, where it lies."""

    store_ts: int
    phys: int


async def oldest_unconsumed(admin: MQAdmin, addr: str, mq: MessageQueue,
                            offset: int) -> Oldest | None:
    """The message at `offset` (or at the next valid offset when it is gone); None when
    there is none or the broker does not answer."""
    for _ in range(2):
        try:
            result = await admin.broker.pull_records(addr, mq, offset, max_nums=1)
        except Errors:
            return None
        if result.records:
            m = result.records[0]
            return Oldest(m.store_timestamp, m.physical_offset)
        if result.status is PullStatus.OFFSET_ILLEGAL and result.next_begin_offset > offset:
            offset = result.next_begin_offset
            continue
        return None
    return None


def list_groups(topics: Iterable[str], known: Collection[str] = ()) -> list[str]:
    """The `known` groups (the brokers' subscription groups) and those the retry topics
    name, sorted, system groups left out."""
    found = set(consumer_groups(topics, known)) | set(known)
    return sorted(g for g in found if g not in SYSTEM_GROUPS and not is_system_group(g))


Table = dict[MessageQueue, OffsetWrapper]


@dataclass(frozen=True, slots=True)
class Known:
    """What the caller read this cycle already, so that `Sampler.sample` need not ask it
    again: each (group, broker name)'s queues from the GET_BROKER_CONSUME_STATS of the
    brokers named in `brokers` (every subscription group of theirs, with or without
    offsets), the groups with clients online, and the groups that pop (their in flight is
    only in GET_CONSUME_STATS's answer on Apache's brokers: read one by one)."""

    tables: Mapping[tuple[str, str], Table]
    brokers: frozenset[str]
    online: frozenset[str]
    popping: frozenset[str] = field(default_factory=frozenset)


class Sampler:
    """Samples a cluster cycle after cycle, keeping what the next cycle needs (the
    previous sample of each queue, cached oldest-message reads, brokers seen)."""

    def __init__(self, cluster: str, interval_ms: int, *, concurrency: int = CONCURRENCY,
                 clock: Callable[[], int] = now_ms, sweep: int = SWEEP) -> None:
        self.cluster = cluster
        self.interval_ms = interval_ms
        self.concurrency = concurrency
        self.clock = clock
        self.previous: dict[QueueKey, QueueSample] = {}
        self._oldest: dict[tuple[str, str, int, int], Oldest] = {}
        #: Groups a per-group read showed popping (a pull offset above the committed one).
        self._popping: set[str] = set()
        self.sweep = sweep
        self._slice = 0  # which slice of the groups a `Known` cycle reads one by one next

    def seed(self, samples: Iterable[QueueSample]) -> None:
        """Resume from samples saved earlier (the newest per queue wins)."""
        for s in samples:
            held = self.previous.get(s.key)
            if held is None or held.ts <= s.ts:
                self.previous[s.key] = s

    async def sample(self, admin: MQAdmin, groups: Sequence[str] | None = None, *,
                     known: Known | None = None) -> Cycle:
        """One cycle over `groups` (every group the name servers and brokers know when
        None), taking what `known` holds instead of asking for it."""
        started = time.perf_counter()
        ts = self.clock()
        try:
            info, topics = await asyncio.gather(admin.namesrv.cluster_info(),
                                                admin.namesrv.all_topics())
        except Errors as exc:
            reason = f"name servers: {exc}"
            return Cycle(ts, self.cluster, self.interval_ms,
                         gaps=tuple(Gap(ts, g, b, reason) for g, b in self._known_pairs()),
                         error=reason, duration_ms=(time.perf_counter() - started) * 1000)
        brokers = await masters(admin, info=info, or_slave=True)
        gate = asyncio.Semaphore(self.concurrency)
        if groups is not None:
            names = list(groups)
        else:
            configured = {g for g, b in known.tables if b in brokers} if known else set()
            unread = [a for b, a in brokers.items() if known is None or b not in known.brokers]
            configured |= await self._configured(admin, unread, gate)
            names = list_groups(topics.topic_list, configured)

        async def stats(group: str, addr: str) -> Table | str:
            async with gate:
                try:
                    return await consume_stats(admin, addr, group)
                except Errors as exc:
                    return str(exc) or type(exc).__name__

        pairs = [(g, b) for g in names for b in brokers]
        answers: list[Table | str | None] = [None] * len(pairs)
        if known is not None:
            one_by_one = self._one_by_one(names, known)
            for i, (g, b) in enumerate(pairs):
                if g not in one_by_one and b in known.brokers:
                    answers[i] = known.tables.get((g, b))
        asked = [i for i, a in enumerate(answers) if a is None]
        for i, answer in zip(asked, await asyncio.gather(
                *(stats(pairs[i][0], brokers[pairs[i][1]]) for i in asked)), strict=True):
            answers[i] = answer
            if not isinstance(answer, str) and any(
                    w.pull_offset is not None and w.pull_offset > w.consumer_offset
                    for w in answer.values()):
                self._popping.add(pairs[i][0])
        gaps = [Gap(ts, g, b, "broker not registered with the name servers")
                for g, b in self._known_pairs() if b not in brokers]
        raw: list[tuple[str, MessageQueue, OffsetWrapper]] = []
        for (group, broker), got in zip(pairs, answers, strict=True):
            if isinstance(got, str):
                gaps.append(Gap(ts, group, broker, got))
            elif got is not None:
                raw.extend((group, mq, w) for mq, w in got.items())
        online = (await self._online(admin, raw, brokers, gate) if known is None
                  else set(known.online))
        oldest = await self._oldest_reads(admin, raw, brokers, gate)
        samples = [self._sample(ts, group, mq, w, group in online, oldest)
                   for group, mq, w in raw]
        for s in samples:
            self.previous[s.key] = s
        return Cycle(ts, self.cluster, self.interval_ms, tuple(samples), tuple(gaps),
                     tuple(names), (time.perf_counter() - started) * 1000)

    def _one_by_one(self, names: Sequence[str], known: Known) -> set[str]:
        """The groups a `Known` cycle still reads one by one: those that pop, and this
        cycle's slice of the rest."""
        at, self._slice = self._slice, (self._slice + 1) % self.sweep
        return (set(known.popping) | self._popping
                | {g for i, g in enumerate(names) if i % self.sweep == at})

    @staticmethod
    async def _configured(admin: MQAdmin, addrs: list[str], gate: asyncio.Semaphore
                          ) -> set[str]:
        """The subscription groups of the brokers that answer."""
        async def table(addr: str) -> set[str]:
            async with gate:
                try:
                    return set((await admin.broker.all_group_config(addr))
                               .subscription_group_table)
                except Errors:
                    return set()

        return set().union(*await asyncio.gather(*(table(a) for a in addrs)))

    def _known_pairs(self) -> list[tuple[str, str]]:
        """(group, broker) pairs sampled before."""
        return sorted({(k[0], k[2]) for k in self.previous})

    async def _online(self, admin: MQAdmin, raw: list[tuple[str, MessageQueue, OffsetWrapper]],
                      brokers: dict[str, str], gate: asyncio.Semaphore) -> set[str]:
        """Groups with consumers online, asked only of groups with lag whose committed
        offset did not move since the last cycle (or that were never sampled)."""
        suspects: dict[str, str] = {}
        for group, mq, w in raw:
            prev = self.previous.get((group, mq.topic, mq.broker_name, mq.queue_id))
            if (w.broker_offset > w.consumer_offset and mq.broker_name in brokers
                    and (prev is None or not _moved(prev, w))):
                suspects.setdefault(group, brokers[mq.broker_name])

        async def ask(group: str, addr: str) -> bool:
            async with gate:
                try:
                    return bool(await admin.broker.consumer_ids(addr, group))
                except ServerSystemError:
                    return False
                except Errors:
                    return False

        found = await asyncio.gather(*(ask(g, a) for g, a in suspects.items()))
        return {g for g, on in zip(suspects, found, strict=True) if on}

    async def _oldest_reads(self, admin: MQAdmin,
                            raw: list[tuple[str, MessageQueue, OffsetWrapper]],
                            brokers: dict[str, str], gate: asyncio.Semaphore
                            ) -> dict[tuple[str, str, int, int], Oldest]:
        wanted = {(mq.topic, mq.broker_name, mq.queue_id, w.consumer_offset): mq
                  for _, mq, w in raw
                  if w.broker_offset > w.consumer_offset and mq.broker_name in brokers}
        found = {k: v for k in wanted if (v := self._oldest.get(k)) is not None}
        missing = [k for k in wanted if k not in found]

        async def read(key: tuple[str, str, int, int]) -> Oldest | None:
            async with gate:
                return await oldest_unconsumed(admin, brokers[key[1]], wanted[key], key[3])

        for key, got in zip(missing, await asyncio.gather(*(read(k) for k in missing)),
                            strict=True):
            if got is not None:
                found[key] = got
        self._oldest = found
        return found

    def _sample(self, ts: int, group: str, mq: MessageQueue, w: OffsetWrapper, online: bool,
                oldest: dict[tuple[str, str, int, int], Oldest]) -> QueueSample:
        prev = self.previous.get((group, mq.topic, mq.broker_name, mq.queue_id))
        lag = max(w.broker_offset - w.consumer_offset, 0)
        in_flight = _in_flight(w, lag)
        produce = consume = None
        commit_ts = ts
        if prev is not None:
            span = (ts - prev.ts) / 1000
            if span > 0:
                produce = (w.broker_offset - prev.broker_offset) / span
                consume = (w.consumer_offset - prev.consumer_offset) / span
            if not _moved(prev, w) and not online and lag > 0:
                commit_ts = prev.commit_ts
        elif lag > 0 and not online and w.last_timestamp > 0:
            commit_ts = min(ts, w.last_timestamp)  # committed no earlier than that message
        found = oldest.get((mq.topic, mq.broker_name, mq.queue_id, w.consumer_offset))
        lag_ms: int | None = 0
        if lag > 0:
            lag_ms = max(ts - found.store_ts, 0) if found is not None else None
        return QueueSample(ts, group, mq.topic, mq.broker_name, mq.queue_id, w.broker_offset,
                           w.consumer_offset, lag, lag_ms, produce, consume, commit_ts,
                           found.phys if found is not None and lag > 0 else None,
                           in_flight=in_flight)


def _in_flight(w: OffsetWrapper, lag: int) -> int:
    """The queue's messages taken by POP and not acked yet (0 without a pull offset)."""
    if w.pull_offset is None:
        return 0
    return min(max(w.pull_offset - w.consumer_offset, 0), lag)


def _moved(prev: QueueSample, w: OffsetWrapper) -> bool:
    """Whether the consumers worked on the queue since `prev`: its committed offset moved,
    or (POP) its pull offset did."""
    pulled = w.consumer_offset + _in_flight(w, max(w.broker_offset - w.consumer_offset, 0))
    return (prev.consumer_offset != w.consumer_offset
            or prev.consumer_offset + prev.in_flight != pulled)

"""Retention risk: will the broker delete a lagging queue's unread messages before the group
reads them?  Forecast from the broker's own cleanup rules and settings.

How this works (Apache 4.9.7's CleanCommitLogService, which the engine's store follows):
a commit-log segment other than the one being written is deleted when it is older than
``fileReservedTime`` hours (its last write) and either the local hour is one of
``deleteWhen`` or the commit-log disk is fuller than ``diskMaxUsedSpaceRatio``; when the
disk is past the forced-clean threshold (``diskSpaceCleanForciblyRatio``, 85 % by default,
or ``diskSpaceWarningLevelRatio``, 90 %) and ``cleanFileForciblyEnable`` holds, segments go
oldest first whatever their age.  Deletion stops at the first segment that may not go.

For a queue with lag, the segment holding its oldest unconsumed message is found from that
message's commit-log offset; its last write is the store time of the first message of the
next segment.  The deletion time D is the first moment the rules allow; every segment the
rules allow by D goes with it, up to a boundary B.  The queue's messages below B (an exact
binary search of its consume queue, QUERY_CONSUME_QUEUE) are at risk; at the queue's
consume rate r, the group reads r x (D - now) of them first, and loses the rest.  It would
need (messages at risk) / (D - now) messages a second instead: that over r is the speed-up
shown.  The segment being written is never at risk until it rolls.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engine.client.admin import MQAdmin
from mqadmin.operations.lag.model import QueueKey, Series
from mqadmin.operations.lag.sample import Errors
from mqadmin.reports.contract import format_duration

HOUR_MS = 3_600_000
SEGMENT_KEYS = ("mappedFileSizeCommitLog", "mapedFileSizeCommitLog")


def _num(settings: Mapping[str, str], key: str, default: float) -> float:
    try:
        return float(settings.get(key, "") or default)
    except ValueError:
        return default


def _ratio(settings: Mapping[str, str], key: str, default: float) -> float:
    """A percent (5.x, ``90``) or a fraction (4.9.7 system property, ``0.90``) as 0..1."""
    value = _num(settings, key, default)
    return value if value <= 1.0 else value / 100


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """One broker's cleanup settings and state, as it reports them."""

    broker: str
    reserved_ms: int
    delete_hours: frozenset[int]
    disk_ratio: float  # used fraction of the commit-log partition
    max_used: float
    forcibly: float
    warning: float
    force_enabled: bool
    segment_size: int
    min_offset: int
    max_offset: int

    @classmethod
    def of(cls, broker: str, settings: Mapping[str, str],
           runtime: Mapping[str, str]) -> RetentionPolicy:
        hours = frozenset(int(t) for t in settings.get("deleteWhen", "04").split(";")
                          if t.strip().isdigit() and 0 <= int(t) < 24)
        size = next((int(settings[k]) for k in SEGMENT_KEYS
                     if settings.get(k, "").strip().isdigit()), 1 << 30)
        return cls(broker, int(_num(settings, "fileReservedTime", 72) * HOUR_MS), hours,
                   _num(runtime, "commitLogDiskRatio", 0.0),
                   _ratio(settings, "diskMaxUsedSpaceRatio", 75),
                   _ratio(settings, "diskSpaceCleanForciblyRatio", 85),
                   _ratio(settings, "diskSpaceWarningLevelRatio", 90),
                   settings.get("cleanFileForciblyEnable", "true").lower() != "false",
                   size, int(_num(runtime, "commitLogMinOffset", 0)),
                   int(_num(runtime, "commitLogMaxOffset", 0)))

    @property
    def immediate(self) -> bool:
        """Past the forced-clean threshold: segments go whatever their age."""
        return self.force_enabled and (self.disk_ratio > self.forcibly
                                       or self.disk_ratio > self.warning)

    @property
    def space_full(self) -> bool:
        return self.disk_ratio > self.max_used

    def deletion_time(self, last_write_ms: int, now_ms: int) -> int | None:
        """When the broker deletes a segment last written at `last_write_ms` (None: its
        rules never will, e.g. no valid deleteWhen hour and a roomy disk)."""
        if self.immediate:
            return now_ms
        at = max(now_ms, last_write_ms + self.reserved_ms)
        if self.space_full:
            return at
        if not self.delete_hours:
            return None
        moment = dt.datetime.fromtimestamp(at / 1000).astimezone()
        for step in range(25):
            probe = moment + dt.timedelta(hours=step)
            if probe.hour in self.delete_hours:
                if step == 0:
                    return at
                top = probe.replace(minute=0, second=0, microsecond=0)
                return int(top.timestamp() * 1000)
        return None


@dataclass(frozen=True, slots=True)
class Risk:
    """A lagging queue's retention forecast."""

    key: QueueKey
    deletes_at_ms: int  # when the segment with the oldest unconsumed message goes
    segment: str  # its file name (20-digit start offset)
    at_risk: int  # unconsumed messages of the queue in the segments going then
    messages: int  # of those, how many the group will not have read by then
    consume_rate: float  # messages/s over the window
    needed_rate: float  # messages/s it would need

    @property
    def speedup(self) -> float | None:
        return self.needed_rate / self.consume_rate if self.consume_rate > 0 else None

    def text(self, now_ms: int) -> str:
        """"loses ≈ 1,240 messages in 5 h 12 min unless it consumes 2.3× faster"."""
        left_ms = self.deletes_at_ms - now_ms
        if left_ms <= 0 or self.needed_rate == float("inf"):
            return f"loses ≈ {self.messages:,} messages at the broker's next cleanup round"
        left = format_duration(left_ms / 1000)
        if self.speedup is not None:
            need = f"unless it consumes {self.speedup:.1f}× faster"
        else:
            need = f"unless it starts consuming (≥ {self.needed_rate:,.1f} msg/s)"
        return f"loses ≈ {self.messages:,} messages in {left} {need}"


async def offset_at_phys(admin: MQAdmin, addr: str, topic: str, queue_id: int, phys: int,
                         lo: int, hi: int) -> int:
    """The first consume-queue offset in [lo, hi) whose message lies at commit-log offset
    `phys` or later (`hi` if none), by binary search over QUERY_CONSUME_QUEUE."""
    while lo < hi:
        mid = (lo + hi) // 2
        body = await admin.broker.query_consume_queue(addr, topic, queue_id, mid, 1)
        entry = body.queue_data[0] if body.queue_data else None
        if entry is None or entry.physic_offset >= phys:
            hi = mid
        else:
            lo = mid + 1
    return lo


class RetentionForecaster:
    """Forecasts risks cycle after cycle, caching what does not change (segment write
    times, consume-queue boundaries)."""

    def __init__(self) -> None:
        self._written: dict[tuple[str, int], int | None] = {}
        self._bounds: dict[tuple[str, str, int, int], int] = {}

    async def policies(self, admin: MQAdmin, brokers: Mapping[str, str]
                       ) -> dict[str, RetentionPolicy]:
        """Each broker's policy, by broker name (brokers that do not answer are left out)."""
        async def one(name: str, addr: str) -> RetentionPolicy | None:
            try:
                settings, runtime = await asyncio.gather(admin.broker.broker_config(addr),
                                                         admin.broker.runtime_info(addr))
            except Errors:
                return None
            return RetentionPolicy.of(name, settings, runtime.table)

        found = await asyncio.gather(*(one(n, a) for n, a in brokers.items()))
        return {p.broker: p for p in found if p is not None}

    async def _last_write(self, admin: MQAdmin, addr: str, policy: RetentionPolicy,
                          start: int) -> int | None:
        """Last write of the segment starting at `start`: the store time of the next
        segment's first message (None for the segment being written)."""
        nxt = start + policy.segment_size
        if nxt >= policy.max_offset:
            return None
        key = (policy.broker, start)
        if key not in self._written:
            try:
                self._written[key] = (await admin.broker.view_message_at(addr, nxt)
                                      ).store_timestamp
            except Errors:
                return None
        return self._written[key]

    async def _boundary(self, admin: MQAdmin, addr: str, policy: RetentionPolicy,
                        start: int, deletes_at: int, now_ms: int) -> int:
        """The commit-log offset below which everything is gone at `deletes_at`."""
        seg = start + policy.segment_size
        for _ in range(64):
            written = await self._last_write(admin, addr, policy, seg)
            when = (policy.deletion_time(written, now_ms) if written is not None else None)
            if when is None or when > deletes_at:
                return seg
            seg += policy.segment_size
        return seg

    async def forecast(self, admin: MQAdmin, series: Sequence[Series],
                       brokers: Mapping[str, str], now_ms: int,
                       policies: Mapping[str, RetentionPolicy] | None = None
                       ) -> dict[QueueKey, Risk]:
        """Risks of the lagging queues in `series` (brokers by name -> address)."""
        if policies is None:
            policies = await self.policies(admin, brokers)
        risks: dict[QueueKey, Risk] = {}
        for s in series:
            last = s.last
            policy = policies.get(last.broker)
            addr = brokers.get(last.broker)
            if last.lag <= 0 or last.oldest_phys is None or policy is None or addr is None:
                continue
            try:
                risk = await self._one(admin, addr, policy, s, now_ms)
            except Errors:
                continue
            if risk is not None:
                risks[s.key] = risk
        if len(self._written) > 4096:  # segments deleted since: forget them
            self._written.clear()
        if len(self._bounds) > 65536:
            self._bounds.clear()
        return risks

    async def _one(self, admin: MQAdmin, addr: str, policy: RetentionPolicy, s: Series,
                   now_ms: int) -> Risk | None:
        last = s.last
        assert last.oldest_phys is not None
        start = last.oldest_phys - last.oldest_phys % policy.segment_size
        written = await self._last_write(admin, addr, policy, start)
        if written is None:
            return None
        deletes_at = policy.deletion_time(written, now_ms)
        if deletes_at is None:
            return None
        bound = await self._boundary(admin, addr, policy, start, deletes_at, now_ms)
        key = (last.topic, last.broker, last.queue_id, bound)
        if key not in self._bounds:
            self._bounds[key] = await offset_at_phys(
                admin, addr, last.topic, last.queue_id, bound, last.consumer_offset,
                last.broker_offset)
        at_risk = self._bounds[key] - last.consumer_offset
        if at_risk <= 0:
            return None
        first = s.samples[0]
        span = (last.ts - first.ts) / 1000
        rate = max((last.consumer_offset - first.consumer_offset) / span, 0.0) if span > 0 \
            else max(last.consume_rate or 0.0, 0.0)
        left = max(deletes_at - now_ms, 0) / 1000
        lost = max(at_risk - int(rate * left), 0)
        if lost <= 0:
            return None
        needed = at_risk / left if left > 0 else float("inf")
        return Risk(s.key, deletes_at, f"{start:020d}", at_risk, lost, rate, needed)

"""Broker statistics: put/get counters per topic and group, with moving TPS windows.

How this works: every counter keeps a running total; `sample()` (once a second) records
(time, total) in a ring of ten minutes, so the TPS over the last 10 s, 60 s and 600 s is a
difference of two samples; a sample a minute (an hour back) and one an hour (a day back) serve
VIEW_BROKER_STATS_DATA's hour and day figures.  Names follow 4.9.7's `BrokerStatsManager`
(TOPIC_PUT_NUMS keyed by topic, GROUP_GET_NUMS keyed by "topic@group", ...), which
VIEW_BROKER_STATS_DATA and mqadmin statsAll use.  Day totals are snapshotted at midnight for
brokerStatus's "yesterday morning".
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
GROUP_GET_FROM_DISK_NUMS = "GROUP_GET_FROM_DISK_NUMS"
GROUP_GET_LATENCY = "GROUP_GET_LATENCY"
# Transactions by real topic (this engine; 5.x keeps them in its TransactionMetrics).
TRANS_HALF_PUT = "TRANS_HALF_PUT"
TRANS_COMMIT = "TRANS_COMMIT"
TRANS_ROLLBACK = "TRANS_ROLLBACK"
# Store-level pull outcomes (4.9.7 `StoreStatsService` getFound/getMiss), keyed "".
STORE_GET_FOUND = "STORE_GET_FOUND"
STORE_GET_MISS = "STORE_GET_MISS"

#: Upper bounds (bytes) of the message size buckets, as 5.3's `rocketmq_message_size` view.
SIZE_BUCKETS = (1024, 4 * 1024, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)

WINDOWS_S = (10, 60, 600)
_RING = 601
_MINUTE_RING = 61  # one sample a minute: an hour back
_HOUR_RING = 25  # one sample an hour: a day back

Sample = tuple[float, int, int]  # (time s, total, times)


@dataclass(slots=True)
class Counter:
    total: int = 0
    times: int = 0  # how many increments (for average per call)
    samples: deque[Sample] = field(default_factory=lambda: deque(maxlen=_RING))
    minutes: deque[Sample] = field(default_factory=lambda: deque(maxlen=_MINUTE_RING))
    hours: deque[Sample] = field(default_factory=lambda: deque(maxlen=_HOUR_RING))
    created: float = 0.0  # time (s) of the implicit (created, 0, 0) sample

    def add(self, value: int, times: int = 1) -> None:
        self.total += value
        self.times += times

    def rate(self, window_s: float, now: float) -> float:
        """Increase per second over the last `window_s` seconds (0 without two samples)."""
        if not self.samples:
            return 0.0
        start = now - window_s
        older = self.samples[0]
        for sample in reversed(self.samples):
            if sample[0] <= start:
                older = sample
                break
        elapsed = now - older[0]
        return (self.total - older[1]) / elapsed if elapsed > 0 else 0.0

    def window(self, window_s: float, now: float) -> tuple[int, float, float]:
        """(sum, per second, sum per increment) over the last `window_s` seconds.

        Uses the 1 s ring up to ten minutes, the minute ring up to an hour, the hour ring
        beyond.  A counter younger than the window counts from its creation (total 0 then);
        a ring that has already dropped what the window needs starts at its oldest sample.
        """
        ring = self.samples if window_s <= 600 else self.minutes if window_s <= 3600 else self.hours
        start = now - window_s
        older: Sample | None = None
        for sample in reversed(ring):
            if sample[0] <= start:
                older = sample
                break
        if older is None:
            older = ring[0] if ring and len(ring) == ring.maxlen else (self.created, 0, 0)
        total = self.total - older[1]
        times = self.times - older[2]
        elapsed = now - older[0]
        return (total, total / elapsed if elapsed > 0 else 0.0,
                total / times if times > 0 else 0.0)


class BrokerStats:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.sets: dict[str, dict[str, Counter]] = {}
        #: TOPIC_PUT_NUMS, TOPIC_PUT_SIZE and BROKER_PUT_NUMS counters by topic (never removed).
        self._put_counters: dict[str, tuple[Counter, Counter, Counter, list[int]]] = {}
        self.yesterday_morning = {BROKER_PUT_NUMS: 0, BROKER_GET_NUMS: 0}
        self.today_morning = {BROKER_PUT_NUMS: 0, BROKER_GET_NUMS: 0}
        self._day = time.localtime(self.clock()).tm_yday
        self._last_minute = float("-inf")
        self._last_hour = float("-inf")

    def counter(self, name: str, key: str) -> Counter:
        table = self.sets.get(name)
        if table is None:
            table = self.sets[name] = {}
        c = table.get(key)
        if c is None:
            c = table[key] = Counter(created=self.clock())
        return c

    def get(self, name: str, key: str) -> Counter | None:
        return self.sets.get(name, {}).get(key)

    # ------------------------------------------------------------------ events

    def on_put(self, topic: str, nums: int, size: int) -> None:
        """One stored send (of `nums` messages): runs per send, so its counters are cached."""
        counters = self._put_counters.get(topic)
        if counters is None:
            counters = self._put_counters[topic] = (
                self.counter(TOPIC_PUT_NUMS, topic), self.counter(TOPIC_PUT_SIZE, topic),
                self.counter(BROKER_PUT_NUMS, ""), [0] * (len(SIZE_BUCKETS) + 2))
        put_nums, put_size, broker_nums, sizes = counters
        put_nums.total += nums
        put_nums.times += 1
        put_size.total += size
        put_size.times += 1
        broker_nums.total += nums
        broker_nums.times += 1
        avg = size // nums if nums else size
        sizes[bisect_left(SIZE_BUCKETS, avg)] += 1
        sizes[-1] += avg

    def size_histogram(self, topic: str) -> list[int] | None:
        """Puts by average message size: a count per `SIZE_BUCKETS` bound, one above, the sum."""
        counters = self._put_counters.get(topic)
        return counters[3] if counters is not None else None

    def put_topics(self) -> list[str]:
        """Every topic that has had a put."""
        return list(self._put_counters)

    def on_get(self, group: str, topic: str, nums: int, size: int) -> None:
        key = f"{topic}@{group}"
        self.counter(GROUP_GET_NUMS, key).add(nums)
        self.counter(GROUP_GET_SIZE, key).add(size)
        self.counter(BROKER_GET_NUMS, "").add(nums)

    def on_send_back(self, group: str, topic: str) -> None:
        self.counter(SNDBCK_PUT_NUMS, f"{topic}@{group}").add(1)

    def on_transaction(self, name: str, topic: str) -> None:
        """A half message stored, committed or rolled back (TRANS_*), by its real topic."""
        self.counter(name, topic).add(1)

    def on_pull(self, found: bool) -> None:
        """One store lookup of a pull: found messages or not (runtime info getFoundTps...)."""
        self.counter(STORE_GET_FOUND if found else STORE_GET_MISS, "").add(1)

    # ------------------------------------------------------------------ figures

    def total(self, name: str, key: str = "") -> int:
        c = self.get(name, key)
        return c.total if c is not None else 0

    def tps(self, name: str, key: str = "", window_s: float = 60) -> float:
        c = self.get(name, key)
        return c.rate(window_s, self.clock()) if c is not None else 0.0

    def sum_totals(self, name: str) -> int:
        """Total of every key of one stats set (e.g. all topics' TOPIC_PUT_SIZE)."""
        return sum(c.total for c in self.sets.get(name, {}).values())

    def window(self, name: str, key: str, window_s: float) -> tuple[int, float, float] | None:
        """(sum, tps, avg per call) of one item over a window; None if it never counted."""
        c = self.get(name, key)
        return c.window(window_s, self.clock()) if c is not None else None

    def tps_text(self, name: str, key: str = "") -> str:
        """Three windows, space separated, as 4.9.7's runtime info prints putTps."""
        return " ".join(f"{self.tps(name, key, w):.2f}" for w in WINDOWS_S)

    def sample(self) -> None:
        """Record every counter's total now; called once a second."""
        now = self.clock()
        minute = now - self._last_minute >= 60
        hour = now - self._last_hour >= 3600
        for table in self.sets.values():
            for c in table.values():
                sample = (now, c.total, c.times)
                c.samples.append(sample)
                if minute:
                    c.minutes.append(sample)
                if hour:
                    c.hours.append(sample)
        if minute:
            self._last_minute = now
        if hour:
            self._last_hour = now
        day = time.localtime(now).tm_yday
        if day != self._day:
            self._day = day
            self.yesterday_morning = dict(self.today_morning)
            self.today_morning = {BROKER_PUT_NUMS: self.total(BROKER_PUT_NUMS),
                                  BROKER_GET_NUMS: self.total(BROKER_GET_NUMS)}

"""The values the lag monitor passes around: one queue's sample, a gap, one cycle."""

from __future__ import annotations

from dataclasses import dataclass, field

#: (group, topic, broker, queue id): one series of samples.
QueueKey = tuple[str, str, str, int]


@dataclass(frozen=True, slots=True)
class QueueSample:
    """One (cycle, group, topic, broker, queue) sample.

    `commit_ts` is when the committed offset was last known to be committed (ms): the
    cycle's time when the offset moved or the group had consumers online (they commit every
    few seconds), else the previous sample's; the verdict's STOP rule reads it.
    `in_flight` counts the messages a POP consumer took and has not acked yet (the
    broker's pull offset minus the committed offset; 0 for push and pull groups): the lag
    is `ready` (not taken yet) plus `in_flight`.
    `oldest_phys` is the commit-log offset of the oldest unconsumed message (None when the
    queue has no lag or it could not be read); the retention forecast reads it.
    """

    ts: int  # ms, the cycle's sample time
    group: str
    topic: str
    broker: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    lag: int
    lag_ms: int | None
    produce_rate: float | None
    consume_rate: float | None
    commit_ts: int
    oldest_phys: int | None = None
    retention_risk: bool = False
    risk_messages: int = 0
    in_flight: int = 0

    @property
    def key(self) -> QueueKey:
        return (self.group, self.topic, self.broker, self.queue_id)

    @property
    def ready(self) -> int:
        """Messages of the lag no consumer has taken yet."""
        return max(self.lag - self.in_flight, 0)


@dataclass(frozen=True, slots=True)
class Gap:
    """A group x broker that could not be sampled in a cycle (broker down, timeout...)."""

    ts: int
    group: str
    broker: str
    reason: str


@dataclass(frozen=True, slots=True)
class Cycle:
    """Everything one sampling round saw."""

    ts: int  # ms
    cluster: str
    interval_ms: int
    samples: tuple[QueueSample, ...] = ()
    gaps: tuple[Gap, ...] = ()
    groups: tuple[str, ...] = ()
    duration_ms: float = 0.0
    error: str = ""  # the whole cycle failed (no name server answered, say)

    @property
    def ok(self) -> bool:
        return not self.error


@dataclass(frozen=True, slots=True)
class Series:
    """One queue's recent samples, oldest first."""

    key: QueueKey
    samples: tuple[QueueSample, ...] = field(default_factory=tuple)

    @property
    def last(self) -> QueueSample:
        return self.samples[-1]

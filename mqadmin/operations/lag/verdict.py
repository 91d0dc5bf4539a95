"""Verdicts on a queue's and a group's recent samples (Burrow's rules), drain rate and ETA.

How this works: the rules, the verdicts' names and their severity order are the lag
contract's (mqadmin/reports/contract.py, shared with the report job): a queue is judged on
its last N samples, a group takes the worst of its queues.  This module adds what the
live monitor shows with them (a POP queue's lag counts its messages in flight; the contract
says how the rules read them): the net drain rate is the lag's fall per second over the
window; the ETA is the lag divided by it (never when it does not fall, unless the lag was
within the allowed lag a sample ago: then it is keeping up).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mqadmin.operations.lag.model import QueueKey, QueueSample, Series
from mqadmin.reports import contract
from mqadmin.reports.contract import (
    GROUP_SEVERITY,
    SEVERITY,
    GroupStatus,
    Rule,
    Status,
    format_duration,
    group_status,
)

DEFAULT_WINDOW = 10
DEFAULT_ALLOWED_LAG = 0
#: How long a client may go between offset commits: Apache's Java client and this engine's
#: persist consumer offsets every 5 s (persistConsumerOffsetInterval).
COMMIT_INTERVAL_MS = 5_000
#: The rules a window shorter than that cannot fire honestly.
SHORT_WINDOW_RULES = frozenset({Rule.OFFSET_STUCK, Rule.NOT_DECREASING})
#: A lagging queue is "keeping up" (no ETA needed) when the lag was within the allowed lag
#: in one of its last this many samples: a busy group whose lag flickers.
KEEPING_UP_SAMPLES = 2


@dataclass(frozen=True, slots=True)
class QueueVerdict:
    """One queue's verdict, the rule that fired, and its drain forecast."""

    key: QueueKey
    status: Status
    rule: str
    lag: int
    lag_ms: int | None
    drain_rate: float | None  # messages/s the lag falls by (negative: it grows)
    eta_s: float | None  # seconds to catch up; 0 caught up; None never at this rate
    samples: int
    keeping_up: bool = False  # lag now, but it was within the allowed lag a sample ago
    rule_id: Rule = Rule.CONSUMING  # the contract's name of the rule that fired (`rule`: words)
    in_flight: int = 0  # of the lag, taken by POP consumers and not acked yet

    @property
    def group(self) -> str:
        return self.key[0]

    @property
    def ready(self) -> int:
        """Of the lag, the messages no consumer has taken yet."""
        return max(self.lag - self.in_flight, 0)


@dataclass(frozen=True, slots=True)
class GroupVerdict:
    group: str
    status: GroupStatus
    worst: QueueVerdict | None  # the queue that decided the status (None: no queues)
    lag: int
    lag_ms: int | None
    drain_rate: float | None
    eta_s: float | None
    queues: tuple[QueueVerdict, ...]
    keeping_up: bool = False  # every lagging queue without an ETA is keeping up
    in_flight: int = 0  # of the lag, taken by POP consumers and not acked yet

    @property
    def ready(self) -> int:
        """Of the lag, the messages no consumer has taken yet."""
        return max(self.lag - self.in_flight, 0)


def drain(samples: Sequence[QueueSample]) -> float | None:
    """Messages per second the lag fell by over `samples` (None with fewer than two)."""
    if len(samples) < 2 or samples[-1].ts <= samples[0].ts:
        return None
    return (samples[0].lag - samples[-1].lag) * 1000 / (samples[-1].ts - samples[0].ts)


def eta(lag: int, rate: float | None, allowed_lag: int = DEFAULT_ALLOWED_LAG) -> float | None:
    """Seconds until `lag` is down to the allowed lag at `rate`; None for never."""
    if lag <= allowed_lag:
        return 0.0
    if rate is None or rate <= 0:
        return None
    return (lag - allowed_lag) / rate


def queue_verdict(series: Series, allowed_lag: int = DEFAULT_ALLOWED_LAG,
                  window: int = DEFAULT_WINDOW, min_span_ms: int = 0) -> QueueVerdict:
    """The verdict on the last `window` samples of one queue.  A stuck offset or a lag
    that never fell over samples spanning less than `min_span_ms` is UNKNOWN: a consumer
    that commits every few seconds looks stuck between two of its commits."""
    samples = series.samples[-window:]
    found = contract.judge(samples, allowed_lag)
    span = samples[-1].ts - samples[0].ts
    if found.rule in SHORT_WINDOW_RULES and span < min_span_ms:
        found = contract.Judgement(Status.UNKNOWN, Rule.ONE_SAMPLE, (
            f"too short to judge: samples over {span / 1000:g} s, less than the "
            f"{min_span_ms / 1000:g} s a client may wait between commits (see lag watch)"))
    last = samples[-1]
    rate = drain(samples)
    keeping_up = last.lag > allowed_lag and any(s.lag <= allowed_lag
                                                for s in samples[-KEEPING_UP_SAMPLES:])
    return QueueVerdict(series.key, found.status, found.text, last.lag, last.lag_ms, rate,
                        eta(last.lag, rate, allowed_lag), len(samples), keeping_up,
                        found.rule, last.in_flight)


def group_verdict(group: str, verdicts: Sequence[QueueVerdict],
                  allowed_lag: int = DEFAULT_ALLOWED_LAG) -> GroupVerdict:
    """The worst of the group's queues, with the group's total lag and drain."""
    if not verdicts:
        return GroupVerdict(group, GroupStatus.OK, None, 0, 0, None, 0.0, ())
    worst = max(verdicts, key=lambda v: (SEVERITY[v.status], v.lag))
    status = group_status(v.status for v in verdicts)
    lag = sum(v.lag for v in verdicts)
    rates = [v.drain_rate for v in verdicts if v.drain_rate is not None]
    rate = sum(rates) if rates else None
    times = [v.lag_ms for v in verdicts if v.lag_ms is not None]
    lagging = [v for v in verdicts if v.lag > allowed_lag]
    etas = [v.eta_s for v in lagging]
    group_eta = 0.0 if not lagging else (None if any(e is None for e in etas)
                                         else max(e for e in etas if e is not None))
    keeping_up = any(v.eta_s is None for v in lagging) and all(
        v.keeping_up for v in lagging if v.eta_s is None)
    return GroupVerdict(group, status, worst, lag, max(times) if times else None, rate,
                        group_eta, tuple(verdicts), keeping_up,
                        sum(v.in_flight for v in verdicts))


def judge(series: Sequence[Series], allowed_lag: int = DEFAULT_ALLOWED_LAG,
          window: int = DEFAULT_WINDOW, min_span_ms: int = 0) -> list[GroupVerdict]:
    """Every group's verdict, worst first (then by lag)."""
    by_group: dict[str, list[QueueVerdict]] = {}
    for s in series:
        by_group.setdefault(s.key[0], []).append(
            queue_verdict(s, allowed_lag, window, min_span_ms))
    found = [group_verdict(g, vs, allowed_lag) for g, vs in by_group.items()]
    return sorted(found, key=lambda v: (-GROUP_SEVERITY[v.status], -v.lag, v.group))


def eta_text(eta_s: float | None, keeping_up: bool = False) -> str:
    """"caught up", "catches up in 14 min at the current rate", "never at the current rate",
    or "keeping up" (no ETA, but the lag was within the allowed lag a sample ago)."""
    if eta_s is None:
        return "keeping up" if keeping_up else "never at the current rate"
    if eta_s <= 0:
        return "caught up"
    return f"catches up in {format_duration(eta_s)} at the current rate"

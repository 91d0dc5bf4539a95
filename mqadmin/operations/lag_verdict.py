"""Verdicts on a queue's and a group's recent samples (Burrow's rules), drain rate and ETA.

How this works: a queue is judged on its last N samples, and only when its current lag is
above the allowed lag (else OK: idle topics are not stalled).  The rules, in this order:

- STOP: the time since the last commit is longer than the window's span of commits
  (consumers gone).  A sample's commit time advances when the offset moves or consumers
  are online (they commit every few seconds); see `QueueSample.commit_ts`.
- REWIND: the committed offset went back and has not recovered (it is still below the
  highest offset before the last step back).
- then, only if the lag never fell to the allowed lag within the window: STALL when the
  committed offset never changed, WARNING when the lag never decreased between two
  samples;
- otherwise OK.

A group takes the worst of its queues: ERROR when any queue is STOP, STALL or REWIND,
WARNING when any is WARNING, else OK.  The net drain rate is the lag's fall per second
over the window; the ETA is the lag divided by it (never when it does not fall, unless
the lag was within the allowed lag a sample ago: then it is keeping up).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from mqadmin.operations.lag_model import QueueKey, QueueSample, Series

DEFAULT_WINDOW = 10
DEFAULT_ALLOWED_LAG = 0
#: A lagging queue is "keeping up" (no ETA needed) when the lag was within the allowed lag
#: in one of its last this many samples: a busy group whose lag flickers.
KEEPING_UP_SAMPLES = 2


class Status(StrEnum):
    """A queue's verdict."""

    OK = "OK"
    UNKNOWN = "UNKNOWN"  # lag, but fewer than two samples to judge it by
    WARNING = "WARNING"
    STALL = "STALL"
    REWIND = "REWIND"
    STOP = "STOP"


class GroupStatus(StrEnum):
    OK = "OK"
    UNKNOWN = "UNKNOWN"
    WARNING = "WARNING"
    ERROR = "ERROR"


SEVERITY = {Status.OK: 0, Status.UNKNOWN: 1, Status.WARNING: 2, Status.STALL: 3,
            Status.REWIND: 4, Status.STOP: 5}
ERRORS = frozenset({Status.STOP, Status.STALL, Status.REWIND})
GROUP_SEVERITY = {GroupStatus.OK: 0, GroupStatus.UNKNOWN: 1, GroupStatus.WARNING: 2,
                  GroupStatus.ERROR: 3}


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

    @property
    def group(self) -> str:
        return self.key[0]


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


def _rule(samples: Sequence[QueueSample], allowed_lag: int) -> tuple[Status, str]:
    last = samples[-1]
    if last.lag <= allowed_lag:
        return Status.OK, f"lag {last.lag} within the allowed {allowed_lag}"
    if len(samples) < 2:
        return Status.UNKNOWN, "one sample so far: needs two to judge"
    commits = [s.commit_ts for s in samples]
    span = commits[-1] - commits[0]
    since = last.ts - commits[-1]
    if since > span:
        return Status.STOP, (f"no commit for {format_duration(since / 1000)}, longer than "
                             f"the window's span of commits ({format_duration(span / 1000)})")
    offsets = [s.consumer_offset for s in samples]
    backs = [i for i in range(1, len(offsets)) if offsets[i] < offsets[i - 1]]
    if backs:
        peak = max(offsets[:backs[-1]])
        if offsets[-1] < peak:
            return Status.REWIND, (f"committed offset went back to {offsets[backs[-1]]} from "
                                   f"{peak} and is still below it ({offsets[-1]})")
    if all(s.lag > allowed_lag for s in samples):
        if all(o == offsets[0] for o in offsets):
            return Status.STALL, (f"committed offset stuck at {offsets[0]} with lag over "
                                  f"{len(samples)} samples")
        lags = [s.lag for s in samples]
        if all(lags[i] >= lags[i - 1] for i in range(1, len(lags))):
            return Status.WARNING, f"lag never decreased over {len(samples)} samples"
    return Status.OK, "consuming"


def queue_verdict(series: Series, allowed_lag: int = DEFAULT_ALLOWED_LAG,
                  window: int = DEFAULT_WINDOW) -> QueueVerdict:
    """The verdict on the last `window` samples of one queue."""
    samples = series.samples[-window:]
    status, rule = _rule(samples, allowed_lag)
    last = samples[-1]
    rate = drain(samples)
    keeping_up = last.lag > allowed_lag and any(s.lag <= allowed_lag
                                                for s in samples[-KEEPING_UP_SAMPLES:])
    return QueueVerdict(series.key, status, rule, last.lag, last.lag_ms, rate,
                        eta(last.lag, rate, allowed_lag), len(samples), keeping_up)


def group_verdict(group: str, verdicts: Sequence[QueueVerdict],
                  allowed_lag: int = DEFAULT_ALLOWED_LAG) -> GroupVerdict:
    """The worst of the group's queues, with the group's total lag and drain."""
    if not verdicts:
        return GroupVerdict(group, GroupStatus.OK, None, 0, 0, None, 0.0, ())
    worst = max(verdicts, key=lambda v: (SEVERITY[v.status], v.lag))
    if any(v.status in ERRORS for v in verdicts):
        status = GroupStatus.ERROR
    elif worst.status is Status.WARNING:
        status = GroupStatus.WARNING
    elif worst.status is Status.UNKNOWN:
        status = GroupStatus.UNKNOWN
    else:
        status = GroupStatus.OK
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
                        group_eta, tuple(verdicts), keeping_up)


def judge(series: Sequence[Series], allowed_lag: int = DEFAULT_ALLOWED_LAG,
          window: int = DEFAULT_WINDOW) -> list[GroupVerdict]:
    """Every group's verdict, worst first (then by lag)."""
    by_group: dict[str, list[QueueVerdict]] = {}
    for s in series:
        by_group.setdefault(s.key[0], []).append(queue_verdict(s, allowed_lag, window))
    found = [group_verdict(g, vs, allowed_lag) for g, vs in by_group.items()]
    return sorted(found, key=lambda v: (-GROUP_SEVERITY[v.status], -v.lag, v.group))


def format_duration(seconds: float) -> str:
    """``35 s``, ``14 min``, ``5 h 12 min``, ``3 d 4 h``."""
    s = max(round(seconds), 0)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def eta_text(eta_s: float | None, keeping_up: bool = False) -> str:
    """"caught up", "catches up in 14 min at the current rate", "never at the current rate",
    or "keeping up" (no ETA, but the lag was within the allowed lag a sample ago)."""
    if eta_s is None:
        return "keeping up" if keeping_up else "never at the current rate"
    if eta_s <= 0:
        return "caught up"
    return f"catches up in {format_duration(eta_s)} at the current rate"

"""The lag contract: the verdicts (names, severity order, rules) and where the history is.

How this works: the lag monitor writes the history with the columns of the lag sample's
schema (schema.py) and judges queues with `judge`; the report job reads the same columns
and recomputes the same rules with window functions (episodes.py); the dashboard shows the
same names.  This module imports only the standard library, so the report job ships it in
its bundle and the monitor imports it from here.  tests/reports/test_rules.py runs one
table of rule cases against both implementations.

The rules, judged on a queue's last N samples (its window) in this order:

- within-allowed (OK): the current lag is at or below the allowed lag (an idle topic is
  not stalled);
- one-sample (UNKNOWN): lag, but fewer than two samples to judge it by;
- no-commit (STOP): the time since the last commit is longer than the window's span of
  commits (the consumers are gone);
- went-back (REWIND): the committed offset went back and is still below the highest offset
  before the last step back;
- then, only if the lag never fell to the allowed lag within the window: offset-stuck
  (STALL) when the consumers' position never changed and messages are ready (the last
  sample's lag is not all in flight), lag-not-decreasing (WARNING) when the lag never
  decreased between two samples;
- otherwise consuming (OK).

The lag of a POP group's queue is its ready messages (not taken yet) plus those in flight
(taken by a consumer, not acked yet: the broker's pull offset minus the committed offset;
0 for push and pull groups).  The consumers' position is the pull offset (the committed
offset plus in flight): the committed offset of a POP queue stops at its oldest unacked
message while the consumers take and ack the ones after it, so a moving pull offset is
progress, and a queue whose whole lag is in flight is not stuck but with its consumers
(who ack it, or the broker hands it out again after the invisible time).  For push and
pull groups the position is the committed offset and every lagging message is ready, so
the rules read as Burrow's.

A group takes its worst queue (by severity, then lag): ERROR when any queue is STOP, STALL
or REWIND, WARNING when the worst is WARNING, UNKNOWN when it is UNKNOWN, else OK.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

#: The history's folder under the monitor's data directory.
DIR_NAME = "lag-history"


class Status(StrEnum):
    """A queue's verdict (and a group's worst queue's in the reports)."""

    OK = "OK"
    UNKNOWN = "UNKNOWN"  # lag, but fewer than two samples to judge it by
    WARNING = "WARNING"
    STALL = "STALL"
    REWIND = "REWIND"
    STOP = "STOP"


class GroupStatus(StrEnum):
    """A group's verdict in `lag status`, alerts and the dashboard."""

    OK = "OK"
    UNKNOWN = "UNKNOWN"
    WARNING = "WARNING"
    ERROR = "ERROR"


#: The severity order, mildest first (the reports store a verdict as this number).
SEVERITY = {status: rank for rank, status in enumerate(Status)}
ERRORS = frozenset({Status.STOP, Status.STALL, Status.REWIND})
GROUP_SEVERITY = {status: rank for rank, status in enumerate(GroupStatus)}


class Rule(StrEnum):
    """The rule that decided a verdict."""

    WITHIN_ALLOWED = "within-allowed"
    ONE_SAMPLE = "one-sample"
    NO_COMMIT = "no-commit"
    WENT_BACK = "went-back"
    OFFSET_STUCK = "offset-stuck"
    NOT_DECREASING = "lag-not-decreasing"
    CONSUMING = "consuming"


#: The verdict each rule gives.
VERDICT = {Rule.WITHIN_ALLOWED: Status.OK, Rule.ONE_SAMPLE: Status.UNKNOWN,
           Rule.NO_COMMIT: Status.STOP, Rule.WENT_BACK: Status.REWIND,
           Rule.OFFSET_STUCK: Status.STALL, Rule.NOT_DECREASING: Status.WARNING,
           Rule.CONSUMING: Status.OK}


class Point(Protocol):
    """What the rules read of a sample (the monitor's `QueueSample` is one)."""

    @property
    def ts(self) -> int: ...
    @property
    def lag(self) -> int: ...
    @property
    def consumer_offset(self) -> int: ...
    @property
    def commit_ts(self) -> int: ...
    @property
    def in_flight(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Judgement:
    """A verdict, the rule that gave it, and the rule's words for this window."""

    status: Status
    rule: Rule
    text: str


def judge(samples: Sequence[Point], allowed_lag: int = 0,
          commits: Sequence[int] | None = None) -> Judgement:
    """The verdict on one queue's window (`samples`, oldest first, at least one).

    Args:
        samples: the window.
        allowed_lag: the lag at or below which the queue is OK.
        commits: the commit times whose span the no-commit rule measures (default: the
            samples' ``commit_ts``; the report gives the group's last N cycles').
    """
    last = samples[-1]
    if last.lag <= allowed_lag:
        return Judgement(Status.OK, Rule.WITHIN_ALLOWED,
                         f"lag {last.lag} within the allowed {allowed_lag}")
    if len(samples) < 2:
        return Judgement(Status.UNKNOWN, Rule.ONE_SAMPLE, "one sample so far: needs two to judge")
    times = [s.commit_ts for s in samples] if commits is None else list(commits)
    span = times[-1] - times[0]
    since = last.ts - times[-1]
    if since > span:
        return Judgement(Status.STOP, Rule.NO_COMMIT, (
            f"no commit for {format_duration(since / 1000)}, longer than the window's span "
            f"of commits ({format_duration(span / 1000)})"))
    offsets = [s.consumer_offset for s in samples]
    backs = [i for i in range(1, len(offsets)) if offsets[i] < offsets[i - 1]]
    if backs:
        peak = max(offsets[:backs[-1]])
        if offsets[-1] < peak:
            return Judgement(Status.REWIND, Rule.WENT_BACK, (
                f"committed offset went back to {offsets[backs[-1]]} from {peak} and is "
                f"still below it ({offsets[-1]})"))
    if all(s.lag > allowed_lag for s in samples):
        position = [s.consumer_offset + s.in_flight for s in samples]
        if all(p == position[0] for p in position) and last.lag > last.in_flight:
            stuck = "committed offset" if not last.in_flight else "pull offset"
            return Judgement(Status.STALL, Rule.OFFSET_STUCK, (
                f"{stuck} stuck at {position[0]} with lag over {len(samples)} samples"))
        lags = [s.lag for s in samples]
        if all(lags[i] >= lags[i - 1] for i in range(1, len(lags))):
            return Judgement(Status.WARNING, Rule.NOT_DECREASING,
                             f"lag never decreased over {len(samples)} samples")
    return Judgement(Status.OK, Rule.CONSUMING, "consuming")


def group_status(statuses: Iterable[Status]) -> GroupStatus:
    """A group's verdict from its queues' (OK for none)."""
    found = set(statuses)
    if found & ERRORS:
        return GroupStatus.ERROR
    for status, group in ((Status.WARNING, GroupStatus.WARNING),
                          (Status.UNKNOWN, GroupStatus.UNKNOWN)):
        if status in found:
            return group
    return GroupStatus.OK


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

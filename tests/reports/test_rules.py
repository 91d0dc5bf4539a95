"""One table of rule cases (a group's queues over time -> the verdict and the rule that gave
it), run against the monitor's verdicts (Python, lag/verdict.py) and the report's (Spark window
functions, episodes): both implement the lag contract's rules (mqadmin/reports/contract.py).

A case's queues are sampled once a minute, every queue every cycle; a commit is a cycle in
which any queue of the group moved (what the history can tell, and what a monitor sees when
the consumers are online).  A POP queue's point also says how many of its lagging messages
are in flight; its position (committed offset plus in flight: the pull offset) moving is a
commit too.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest

from mqadmin.operations.lag.model import QueueSample, Series
from mqadmin.operations.lag.verdict import group_verdict, queue_verdict
from mqadmin.reports.contract import SEVERITY, Rule, Status

#: Spark is slow to start on a busy machine: the session fixture counts here.
pytestmark = pytest.mark.timeout(900)

T0 = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
MINUTE = 60_000
#: (committed offset, lag) or, for POP, (committed offset, lag, in flight) per cycle
Points = list[tuple[int, ...]]


def in_flight(point: tuple[int, ...]) -> int:
    return point[2] if len(point) > 2 else 0


def position(point: tuple[int, ...]) -> int:
    return point[0] + in_flight(point)


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    queues: dict[int, Points]  # queue id -> its samples
    status: Status  # the group's worst queue's verdict at the last cycle
    rule: Rule
    window: int = 5
    allowed_lag: int = 0


MOVING = [(i * 10, 100 - i) for i in range(8)]  # 8 samples consuming, lag falling

CASES = [
    Case("idle", {0: [(7, 0)] * 6}, Status.OK, Rule.WITHIN_ALLOWED),
    Case("draining", {0: [(i * 10, 50 - i * 10) for i in range(6)]}, Status.OK,
         Rule.WITHIN_ALLOWED),
    Case("within-allowed", {0: [(5, 10 + i) for i in range(6)]}, Status.OK,
         Rule.WITHIN_ALLOWED, allowed_lag=20),
    Case("first-sample", {0: [(5, 3)]}, Status.UNKNOWN, Rule.ONE_SAMPLE),
    Case("consuming", {0: [(i * 3, 10 + (i % 2)) for i in range(6)]}, Status.OK,
         Rule.CONSUMING),
    Case("touched-zero", {0: [(i * 2, lag) for i, lag in enumerate((5, 5, 0, 5, 6, 7))]},
         Status.OK, Rule.CONSUMING),
    Case("slow", {0: [(i, 10 + i) for i in range(6)]}, Status.WARNING, Rule.NOT_DECREASING),
    Case("flat-lag", {0: [(i, 9) for i in range(6)]}, Status.WARNING, Rule.NOT_DECREASING),
    Case("stuck", {0: [(5, 10 + i) for i in range(6)],  # this queue stands still ...
                   1: [(i * 5, 3 * (i % 2)) for i in range(6)]},  # ... another moves
         Status.STALL, Rule.OFFSET_STUCK),
    Case("gone", {0: [(5, 10 + i) for i in range(6)]}, Status.STOP, Rule.NO_COMMIT),
    Case("gone-two-queues", {0: [(5, 10 + i) for i in range(6)], 1: [(9, 1)] * 6},
         Status.STOP, Rule.NO_COMMIT),
    Case("rewound", {0: [(100, 5), (110, 5), (120, 5), (60, 65), (61, 66), (62, 66)]},
         Status.REWIND, Rule.WENT_BACK),
    Case("rewind-recovered", {0: [(o, 90) for o in (10, 20, 30, 5, 31, 40)]},
         Status.WARNING, Rule.NOT_DECREASING),
    Case("rewound-then-gone", {0: [(o, 50) for o in (100, 110, 120, 60, 60, 60, 60, 60, 60)]},
         Status.STOP, Rule.NO_COMMIT),
    Case("rewind-beats-warning", {0: [(30, 9), (40, 9), (20, 29), (20, 29), (20, 29)],
                                1: [(i, 1) for i in range(5)]},
         Status.REWIND, Rule.WENT_BACK),
    # Silent for less than the window's span of commits: not yet STOP ...
    Case("short-silence", {0: MOVING + [(70, 93 + i) for i in range(1, 4)]}, Status.OK,
         Rule.CONSUMING, window=10),
    # ... silent longer: STOP.
    Case("long-silence", {0: MOVING + [(70, 93 + i) for i in range(1, 10)]}, Status.STOP,
         Rule.NO_COMMIT, window=10),
    # POP: a queue whose whole lag is in flight (the consumers hold it) is not stuck, though
    # its committed offset stands still: the lag never fell, a warning ...
    Case("pop-all-in-flight", {0: [(5, 4, 4)] * 6, 1: [(i * 5, 3 * (i % 2)) for i in range(6)]},
         Status.WARNING, Rule.NOT_DECREASING),
    # ... its consumers taking more while the oldest is not acked yet: the pull offset moves ...
    Case("pop-taking", {0: [(5, 10 + i, 2 + i) for i in range(6)]}, Status.WARNING,
         Rule.NOT_DECREASING),
    # ... acking: the committed offset moves, in flight or not ...
    Case("pop-acking", {0: [(i * 3, 10 + (i % 2), 5) for i in range(6)]}, Status.OK,
         Rule.CONSUMING),
    # ... but messages ready and the pull offset standing still: no one takes them.
    Case("pop-not-taking", {0: [(5, 10 + i, 2) for i in range(6)],
                            1: [(i * 5, 3 * (i % 2)) for i in range(6)]},
         Status.STALL, Rule.OFFSET_STUCK),
]


def test_every_rule_has_a_case() -> None:
    assert {c.rule for c in CASES} == set(Rule)


def samples(case: Case) -> dict[int, list[QueueSample]]:
    """The case's samples per queue, with the commit times a commit-per-moving-cycle gives."""
    cycles = max(len(p) for p in case.queues.values())
    out: dict[int, list[QueueSample]] = defaultdict(list)
    commit = 0
    for i in range(cycles):
        ts = i * MINUTE
        now = {q: p[i] for q, p in case.queues.items()}
        if any(i == 0 or case.queues[q][i - 1][0] != p[0]
               or position(case.queues[q][i - 1]) != position(p) for q, p in now.items()):
            commit = ts
        for q, p in now.items():
            off, lag = p[0], p[1]
            out[q].append(QueueSample(ts, case.name, "t", "b", q, off + lag, off, lag, None,
                                      None, None, commit, in_flight=in_flight(p)))
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_python_verdicts(case: Case) -> None:
    verdicts = [queue_verdict(Series(s[0].key, tuple(s)), case.allowed_lag, case.window)
                for s in samples(case).values()]
    worst = group_verdict(case.name, verdicts, case.allowed_lag).worst
    assert worst is not None
    assert (worst.status, worst.rule_id) == (case.status, case.rule)


def test_spark_verdicts(spark: Any) -> None:
    from mqadmin.reports import episodes

    cols = ("cluster", "group", "topic", "broker", "queue_id", "ts", "consumer_offset", "lag",
            "lag_ms", "interval_ms", "ok", "retention_risk", "risk_messages", "in_flight")
    got = {}
    for window, allowed in sorted({(c.window, c.allowed_lag) for c in CASES}):
        rows = [("c", c.name, "t", "b", q, T0 + dt.timedelta(minutes=i), p[0], p[1], None,
                 MINUTE, True, False, 0, in_flight(p))
                for c in CASES if (c.window, c.allowed_lag) == (window, allowed)
                for q, points in c.queues.items() for i, p in enumerate(points)]
        frame = spark.createDataFrame(rows, "cluster string, `group` string, topic string, "
                                      "broker string, queue_id int, ts timestamp, "
                                      "consumer_offset bigint, lag bigint, lag_ms bigint, "
                                      "interval_ms int, ok boolean, retention_risk boolean, "
                                      "risk_messages bigint, in_flight bigint")
        assert tuple(frame.columns) == cols
        states = episodes.group_states(episodes.queue_verdicts(frame, window, allowed), window)
        for r in states.orderBy("ts").collect():
            got[r["group"]] = (episodes.NAMES[r["severity"]], r["rule"])
    assert got == {c.name: (c.status.value, c.rule.value) for c in CASES}
    assert {s.value: n for s, n in SEVERITY.items()} == episodes.SEVERITY

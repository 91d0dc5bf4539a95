"""Burrow's rules on synthetic sample series, with hypothesis for the invariants."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mqadmin.operations.lag.model import QueueSample, Series
from mqadmin.operations.lag.verdict import (
    COMMIT_INTERVAL_MS,
    GroupStatus,
    Status,
    eta_text,
    format_duration,
    group_verdict,
    judge,
    queue_verdict,
)

KEY = ("g", "t", "broker-a", 0)
STEP = 10_000


def series(offsets: list[int], ends: list[int], *, commits: list[int] | None = None,
           start: int = 1_000_000) -> Series:
    """Samples every STEP ms; commit time = sample time unless `commits` says."""
    samples = []
    for i, (co, bo) in enumerate(zip(offsets, ends, strict=True)):
        ts = start + i * STEP
        commit = commits[i] if commits is not None else ts
        samples.append(QueueSample(ts, *KEY, bo, co, max(bo - co, 0), 0, None, None, commit))
    return Series(KEY, tuple(samples))


def test_idle_queue_is_ok() -> None:
    v = queue_verdict(series([5] * 10, [5] * 10))
    assert v.status is Status.OK and v.eta_s == 0.0


def test_stall_warning_ok_and_eta() -> None:
    assert queue_verdict(series([5] * 10, [9] * 10)).status is Status.STALL
    growing = queue_verdict(series(list(range(0, 20, 2)), list(range(5, 35, 3))))
    assert growing.status is Status.WARNING and growing.eta_s is None
    draining = queue_verdict(series(list(range(0, 50, 5)), [100] * 10))
    assert draining.status is Status.OK
    assert draining.drain_rate == 0.5 and draining.eta_s == 110.0
    assert eta_text(draining.eta_s) == "catches up in 1 min at the current rate"


def test_stop_when_commits_stopped_longer_than_their_span() -> None:
    ts = [1_000_000 + i * STEP for i in range(10)]
    commits = ts[:3] + [ts[2]] * 7  # committed for 20 s, then nothing for 70 s
    v = queue_verdict(series([0, 1, 2] + [2] * 7, [50] * 10, commits=commits))
    assert v.status is Status.STOP
    assert "longer than the window's span of commits" in v.rule


def test_rewind_until_recovered() -> None:
    assert queue_verdict(series([10, 20, 30, 5, 8, 9], [90] * 6)).status is Status.REWIND
    recovered = queue_verdict(series([10, 20, 30, 5, 31, 40], [90] * 6))
    assert recovered.status is not Status.REWIND


def test_group_takes_worst_queue() -> None:
    ok = queue_verdict(series([5] * 3, [5] * 3))
    stall = queue_verdict(series([5] * 3, [9] * 3))
    g = group_verdict("g", [ok, stall])
    assert g.status is GroupStatus.ERROR and g.worst is stall and g.lag == 4
    assert judge([series([5] * 3, [9] * 3)])[0].status is GroupStatus.ERROR


def test_durations() -> None:
    assert format_duration(35) == "35 s"
    assert format_duration(14 * 60 + 3) == "14 min"
    assert format_duration(5 * 3600 + 12 * 60) == "5 h 12 min"


lags = st.lists(st.integers(1, 10_000), min_size=2, max_size=12)


@given(offset=st.integers(0, 10**9), lag_list=lags, online=st.booleans())
def test_constant_offset_with_lag_is_never_ok(offset: int, lag_list: list[int],
                                              online: bool) -> None:
    ends = [offset + lag for lag in lag_list]
    commits = None if online else [1_000_000] * len(ends)
    v = queue_verdict(series([offset] * len(ends), ends, commits=commits))
    assert v.status is not Status.OK
    assert v.status in (Status.STALL, Status.STOP)


@given(steps=st.lists(st.integers(0, 1000), min_size=1, max_size=12),
       end=st.integers(0, 10**6))
def test_series_that_drains_to_zero_ends_ok(steps: list[int], end: int) -> None:
    offsets = [end - sum(steps[i:]) for i in range(len(steps))] + [end]
    v = queue_verdict(series(offsets, [end] * len(offsets)))
    assert v.status is Status.OK and v.lag == 0 and v.eta_s == 0.0


@given(offsets=st.lists(st.integers(0, 1000), min_size=2, max_size=12),
       extra=st.lists(st.integers(0, 1000), min_size=2, max_size=12))
def test_verdict_is_total_and_group_matches_worst(offsets: list[int], extra: list[int]) -> None:
    n = min(len(offsets), len(extra))
    ends = [o + e for o, e in zip(offsets[:n], extra[:n], strict=True)]
    v = queue_verdict(series(offsets[:n], ends))
    g = group_verdict("g", [v])
    assert (g.status is GroupStatus.ERROR) == (v.status in (Status.STOP, Status.STALL,
                                                           Status.REWIND))
    assert (v.eta_s is None) == (v.lag > 0 and (v.drain_rate is None or v.drain_rate <= 0))


def test_keeping_up_only_when_the_lag_was_down_a_sample_ago() -> None:
    flicker = queue_verdict(series([10, 11, 12, 13], [10, 12, 12, 14]))
    assert flicker.status is Status.OK and flicker.eta_s is None and flicker.keeping_up
    assert eta_text(flicker.eta_s, flicker.keeping_up) == "keeping up"
    growing = queue_verdict(series([0, 1, 2, 3, 4], [0, 3, 6, 9, 12]))
    assert growing.status is Status.OK and not growing.keeping_up  # lag 0 only long ago
    assert eta_text(growing.eta_s, growing.keeping_up) == "never at the current rate"



def quick(commit: int | None = None) -> Series:
    """Three samples half a second apart, offset stuck at 5 with lag 4; committed at `commit`
    (an offline group) or, as the sampler assumes of an online one, at each sample."""
    return Series(KEY, tuple(QueueSample(ts, *KEY, 9, 5, 4, 0, None, None,
                                         ts if commit is None else commit)
                             for ts in range(1_000_000, 1_001_500, 500)))


def test_a_quick_sampling_shorter_than_a_commit_interval_does_not_call_a_stall() -> None:
    """Three samples half a second apart see a healthy consumer between two of its commits
    (Apache's Java client and ours commit every 5 s): too short to say STALL."""
    assert queue_verdict(quick()).status is Status.STALL  # the contract alone
    v = queue_verdict(quick(), min_span_ms=COMMIT_INTERVAL_MS)
    assert v.status is Status.UNKNOWN and "too short to judge" in v.rule
    long_enough = queue_verdict(series([5] * 3, [9] * 3), min_span_ms=COMMIT_INTERVAL_MS)
    assert long_enough.status is Status.STALL  # 20 s of samples
    stopped = queue_verdict(quick(1_000), min_span_ms=COMMIT_INTERVAL_MS)
    assert stopped.status is Status.STOP  # no commit for far longer than the window: STOP

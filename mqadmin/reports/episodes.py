"""Verdicts recomputed from the samples with window functions (the lag contract's rules,
those of `lag status`), and the STOP/REWIND/STALL and retention-risk episodes they form.

How this works: for every queue sample, the window is the queue's last `n` samples (this one
included), ordered by time, judged by the rules of contract.py in their order (the table of
rule cases in tests/reports/test_rules.py holds this module and the monitor's verdicts to
them).  Two things are the history's own: it has no commit timestamps, so a commit is taken
to happen in a cycle where any queue of the group moved (the group's consumers are online
and committing), and the no-commit rule (STOP) is therefore judged once per group cycle over
the group's last `n` cycles (then every lagging queue of it is STOP); and the went-back rule
reads as "the committed offset is below the window's highest", which is the same thing. A
group whose every queue stands still is STOP, not STALL, once its standstill outlasts the
rest of the window (the live `lag status`, which sees the connections, can tell the two
apart). A POP queue's position is its pull offset (the committed offset plus in flight): a
cycle where it moved is a commit too, and a queue whose lag is all in flight is not STALL
(see contract.py). Only one sort of the samples (by queue and time) is needed; the group's
rules run on the per-cycle aggregate. A group takes its worst queue's verdict each cycle.
Verdicts are stored as the contract's severity numbers. Episodes are runs of consecutive
cycles in the same state ("gaps and islands"); a missing cycle (more than 1.5 intervals
between samples) ends one.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from .contract import SEVERITY as RANKS
from .contract import VERDICT, Rule, Status
from .dataset import QUEUE_KEY

WINDOW = 10
#: The contract's verdicts by name, as the severity numbers the columns hold.
SEVERITY = {status.value: rank for status, rank in RANKS.items()}
NAMES = {v: k for k, v in SEVERITY.items()}
EPISODE_STATES = ("STOP", "REWIND", "STALL")


KEY = "_key"


def keyed(df: DataFrame, keys: Sequence[str]) -> tuple[DataFrame, WindowSpec]:
    """`df` with ``_key``, a 64-bit hash of `keys`, and the window over `keys` in time
    order, partitioned by ``_key`` then `keys`: Spark sorts the rows by the partition
    columns first, and a leading long gives its radix/prefix sort something to work with
    where the names (one cluster, long group names) would not; the names follow, so a
    hash collision cannot merge two series.  The hash is one column, so every window over
    it shares one sort."""
    spec = Window.partitionBy(KEY, *keys).orderBy("ts")
    return df.withColumn(KEY, F.xxhash64(*keys)), spec


def _ms(col: Column) -> Column:
    return F.unix_millis(col)


def queue_verdicts(rows: DataFrame, window: int = WINDOW, allowed_lag: int = 0) -> DataFrame:
    """The sampled (``ok``) rows of `rows` with ``severity``, the queue's verdict by every
    rule but no-commit (STOP is the group's, see `group_states`), ``rule`` (the contract's
    name of the rule that gave it), ``moved`` (the committed offset changed since the
    queue's previous sample, or this is its first), and the retention risk (``risk``,
    ``risk_messages``)."""
    if window < 2:
        raise ValueError("the verdict window needs at least 2 samples")
    # One shuffle for every step: hashed by group, the rows of a queue and the cycles of a
    # group are each in one partition, so the queue windows, the group's cycles and its
    # windows (group_states, islands) only sort.
    rows, series = keyed(rows.filter(F.col("ok")).repartition("cluster", "group"), QUEUE_KEY)
    last_n = series.rowsBetween(-(window - 1), 0)
    pairs = series.rowsBetween(-(window - 2), 0)
    position = F.col("consumer_offset") + F.col("in_flight")  # the pull offset (POP)
    prev_offset = F.lag("consumer_offset").over(series)
    prev_position = F.lag(position).over(series)
    decreased = F.coalesce((F.col("lag") < F.lag("lag").over(series)).cast("int"), F.lit(0))
    df = rows.select(
        KEY, *QUEUE_KEY, "ts", "consumer_offset", "lag", "lag_ms", "interval_ms",
        F.col("retention_risk").cast("int").alias("risk"),
        F.when(F.col("retention_risk"), F.col("risk_messages")).otherwise(0)
        .alias("risk_messages"),
        (prev_offset.isNull() | (F.col("consumer_offset") != prev_offset)
         | (position != prev_position)).cast("int").alias("moved"),
        decreased.alias("decreased"), position.alias("position"),
        (F.col("lag") > F.col("in_flight")).alias("ready"))
    rewind = F.col("consumer_offset") < F.max("consumer_offset").over(last_n)
    never_fell = F.min("lag").over(last_n) > allowed_lag
    full = F.count("*").over(last_n) >= 2
    stalled = (F.min("position").over(last_n) == F.max("position").over(last_n)) \
        & F.col("ready")
    no_decrease = F.max("decreased").over(pairs) == 0
    rules = ((F.col("lag") <= allowed_lag, Rule.WITHIN_ALLOWED), (~full, Rule.ONE_SAMPLE),
             (rewind, Rule.WENT_BACK), (never_fell & stalled, Rule.OFFSET_STUCK),
             (never_fell & no_decrease, Rule.NOT_DECREASING))
    severity: Column = F.lit(SEVERITY[Status.OK])
    rule: Column = F.lit(Rule.CONSUMING.value)
    for cond, fired in reversed(rules):  # the first rule that holds decides
        severity = F.when(cond, RANKS[VERDICT[fired]]).otherwise(severity)
        rule = F.when(cond, fired.value).otherwise(rule)
    # `rule` costs nothing where unused: Spark prunes the column when no one reads it.
    return df.select(*QUEUE_KEY, "ts", "lag", "lag_ms", "interval_ms", "risk",
                     "risk_messages", "moved",
                     (F.col("lag") > allowed_lag).alias("lagging"),
                     severity.alias("severity"), rule.alias("rule"))


def group_states(verdicts: DataFrame, window: int = WINDOW) -> DataFrame:
    """Per (cluster, group, ts): the worst queue's ``severity`` with STOP decided on the
    group's commits, the topics in an ERROR state (STOP, REWIND, STALL), how many queues,
    and the cycle's lag, time lag, interval and retention risk (the group's cycles, as the
    figures sum them), and ``rule``: the rule that decided (the worst queue's, by severity
    then lag, as the monitor picks it); drop it where unused before caching the states.

    A commit happens in a cycle where any queue of the group moved; STOP holds when the
    time since the last commit is longer than the span of the commits of the group's last
    `window` cycles, and then every lagging queue is STOP."""
    bad = F.col("severity") >= SEVERITY["STALL"]
    # The topic sets make this a sort-based aggregate beyond a few keys: a leading hash of
    # the names gives the sort a long prefix to compare.
    cycles = verdicts.groupBy(F.xxhash64("cluster", "group").alias(KEY), "cluster", "group",
                              "ts").agg(
        F.max("severity").alias("queue_severity"), F.max("moved").alias("moved"),
        F.max_by("rule", F.struct("severity", "lag")).alias("queue_rule"),
        F.max(F.col("lagging").cast("int")).alias("lagging"),
        F.collect_set(F.when(bad, F.col("topic"))).alias("bad_topics"),
        F.collect_set(F.when(F.col("lagging"), F.col("topic"))).alias("lagging_topics"),
        F.sum(bad.cast("int")).alias("bad_queues"),
        F.sum(F.col("lagging").cast("int")).alias("lagging_queues"),
        F.sum("lag").alias("lag"), F.max("lag_ms").alias("lag_ms"),
        F.max("interval_ms").alias("interval_ms"), F.max("risk").alias("risk"),
        F.sum("risk_messages").alias("risk_messages"))
    series = Window.partitionBy(KEY, "cluster", "group").orderBy("ts")
    commit = F.max(F.when(F.col("moved") > 0, _ms(F.col("ts")))).over(
        series.rowsBetween(Window.unboundedPreceding, 0))
    cycles = cycles.withColumn("commit_ms", commit)
    first = F.min("commit_ms").over(series.rowsBetween(-(window - 1), 0))
    stop = (F.col("lagging") > 0) & (
        (_ms(F.col("ts")) - F.col("commit_ms")) > (F.col("commit_ms") - first))
    return cycles.select(
        "cluster", "group", "ts", "lag", "lag_ms", "interval_ms", "risk", "risk_messages",
        F.when(stop, SEVERITY["STOP"]).otherwise(F.col("queue_severity")).alias("severity"),
        F.when(stop, F.col("lagging_topics")).otherwise(F.col("bad_topics")).alias("topics"),
        F.when(stop, F.col("lagging_queues")).otherwise(F.col("bad_queues"))
        .alias("bad_queues"),
        F.when(stop, F.lit(Rule.NO_COMMIT.value)).otherwise(F.col("queue_rule")).alias("rule"))


def state_time(states: DataFrame) -> DataFrame:
    """Per (cluster, group): time (ms) spent in each verdict, as ``<name>_ms`` columns."""
    return states.groupBy("cluster", "group").agg(*[
        F.sum(F.when(F.col("severity") == sev, F.col("interval_ms")).otherwise(0))
        .alias(f"{name.lower()}_ms") for name, sev in SEVERITY.items() if sev > 0])


def islands(df: DataFrame, keys: Sequence[str], state: Column) -> DataFrame:
    """`df` (cycles with ts and interval_ms) with ``state`` and an ``episode`` number that
    grows whenever the state changes or a cycle is missing."""
    with_state, ordered = keyed(df.withColumn("state", state), keys)
    prev_state = F.lag("state").over(ordered)
    prev_ts = F.lag("ts").over(ordered)
    jump = (_ms(F.col("ts")) - _ms(prev_ts)) > F.col("interval_ms") * 1.5
    new = prev_state.isNull() | (F.col("state") != prev_state) | jump
    return with_state.withColumn("episode", F.sum(new.cast("int")).over(
        ordered.rowsBetween(Window.unboundedPreceding, 0))).drop(KEY)


def _episode_aggs() -> list[Column]:
    last = F.max_by(F.col("interval_ms"), F.col("ts"))
    return [F.min("ts").alias("start"),
            (F.timestamp_millis(_ms(F.max("ts")) + last)).alias("end"),
            F.count("*").alias("cycles"), F.sum("interval_ms").alias("duration_ms"),
            F.max("lag").alias("lag_max"), F.max("lag_ms").alias("lag_ms_max")]


def verdict_episodes(states: DataFrame) -> DataFrame:
    """Runs of STOP, REWIND or STALL cycles per (cluster, group): start, end (the last
    cycle's time plus its interval), cycles, duration, worst lag, the topics involved."""
    keyed = islands(states, ["cluster", "group"], F.col("severity"))
    return keyed.filter(F.col("state") >= SEVERITY["STALL"]) \
        .groupBy("cluster", "group", "episode", "state").agg(
            *_episode_aggs(),
            F.array_sort(F.array_distinct(F.flatten(F.collect_list("topics")))).alias("topics"),
            F.max("bad_queues").alias("queues")) \
        .withColumn("state", F.element_at(
            F.create_map(*[x for sev, name in sorted(NAMES.items())
                           for x in (F.lit(sev), F.lit(name))]), F.col("state")))


def risk_episodes(cycles: DataFrame) -> DataFrame:
    """Runs of cycles in which a group had any queue at retention risk: start, end,
    duration, and the most messages at risk in one cycle.  Give it only the cycles of the
    groups ever at risk (all their cycles: the others end their runs)."""
    keyed = islands(cycles, ["cluster", "group"], F.col("risk") > 0)
    return keyed.filter(F.col("state")).groupBy("cluster", "group", "episode").agg(
        *_episode_aggs(), F.max("risk_messages").alias("risk_messages_max"))

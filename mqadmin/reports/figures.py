"""Per group and per topic figures, worst hours, the hour-of-day heat map and the lag
timeline, as DataFrame -> DataFrame transforms over the cycle series of dataset.py.

How this works: percentiles are Spark's ``percentile_approx`` with an accuracy of 10,000,
which is the nearest-rank definition (the value at rank ceil(p * n) of the sorted samples)
exactly while a series has fewer than 10,000 samples, and within n / 10,000 ranks of it
beyond.  A cycle breaches its group's SLO when its time lag is above the threshold; each
breaching cycle counts its sampling interval (``interval_ms``), so missing cycles and gaps
never add breach time.  Cycles whose time lag is unknown count as samples but not in the
time percentiles, nor as breaches.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

ACCURACY = 10_000
QUANTILES = (0.5, 0.95, 0.99)
WORST_HOURS = 3


def _breach() -> Column:
    return F.col("lag_ms").isNotNull() & (F.col("lag_ms") > F.col("slo_ms"))


def _stats() -> list[Column]:
    lag_q = F.percentile_approx("lag", list(QUANTILES), ACCURACY)
    ms_q = F.percentile_approx("lag_ms", list(QUANTILES), ACCURACY)
    return [
        F.count("*").alias("samples"),
        F.sum("interval_ms").alias("covered_ms"),
        F.count("lag_ms").alias("timed_samples"),
        lag_q[0].alias("lag_p50"), lag_q[1].alias("lag_p95"), lag_q[2].alias("lag_p99"),
        F.max("lag").alias("lag_max"),
        ms_q[0].alias("lag_ms_p50"), ms_q[1].alias("lag_ms_p95"),
        ms_q[2].alias("lag_ms_p99"), F.max("lag_ms").alias("lag_ms_max"),
        F.sum(F.when(_breach(), F.col("interval_ms")).otherwise(0)).alias("breach_ms"),
        F.sum(F.when(F.col("risk") > 0, F.col("interval_ms")).otherwise(0)).alias("risk_ms"),
        F.max("risk_messages").alias("risk_messages_max"),
        F.max("slo_ms").alias("slo_ms"),
    ]


def series_figures(cycles: DataFrame, keys: Sequence[str]) -> DataFrame:
    """Per `keys`: samples, covered time, percentiles and max of lag (messages, ms), breach
    time above the SLO and time at retention risk.  `cycles` carries ``slo_ms``."""
    return cycles.groupBy(*keys).agg(*_stats())


def trend_figures(cycles: DataFrame, keys: Sequence[str]) -> DataFrame:
    """Per `keys`, what the trend compares (summary.trend): samples, breach time and the
    p95 time lag, the same figures as `series_figures` without the others' sketches."""
    return cycles.groupBy(*keys).agg(
        F.count("*").alias("samples"),
        F.percentile_approx("lag_ms", 0.95, ACCURACY).alias("lag_ms_p95"),
        F.sum(F.when(_breach(), F.col("interval_ms")).otherwise(0)).alias("breach_ms"))


def group_figures(cycles: DataFrame, gaps: DataFrame, period_ms: int) -> DataFrame:
    """`series_figures` per (cluster, group) plus gap cycles and coverage (covered time
    over the period's length, at most 1); a group seen only in gaps still gets a row."""
    keys = ["cluster", "group"]
    stats = series_figures(cycles, keys)
    gap = gaps.groupBy(*keys).agg(F.count("*").alias("gap_cycles"),
                                  F.sum("interval_ms").alias("gap_ms"))
    joined = stats.join(gap, keys, "full")
    return joined.select(
        *keys,
        *[F.coalesce(F.col(c), F.lit(0)).alias(c) if c in ("samples", "covered_ms",
                                                             "timed_samples", "breach_ms",
                                                             "risk_ms") else F.col(c)
          for c in stats.columns if c not in keys],
        F.coalesce(F.col("gap_cycles"), F.lit(0)).alias("gap_cycles"),
        F.coalesce(F.col("gap_ms"), F.lit(0)).alias("gap_ms"),
        F.least(F.lit(1.0), F.coalesce(F.col("covered_ms"), F.lit(0)) / F.lit(period_ms))
        .alias("coverage"),
    )


def worst_hours(cycles: DataFrame, top: int = WORST_HOURS) -> DataFrame:
    """Per (cluster, group), its `top` hours (UTC) by breach time then by worst time lag,
    only hours with any breach or lag; ``rank`` 1 is the worst."""
    hours = cycles.withColumn("hour", F.date_trunc("hour", F.col("ts"))) \
        .groupBy("cluster", "group", "hour").agg(
            F.sum(F.when(_breach(), F.col("interval_ms")).otherwise(0)).alias("breach_ms"),
            F.max("lag_ms").alias("lag_ms_max"), F.max("lag").alias("lag_max"))
    hours = hours.filter((F.col("breach_ms") > 0) | (F.col("lag_max") > 0))
    order = Window.partitionBy("cluster", "group").orderBy(
        F.col("breach_ms").desc(), F.col("lag_ms_max").desc_nulls_last(),
        F.col("lag_max").desc(), F.col("hour"))
    return hours.withColumn("rank", F.row_number().over(order)).filter(F.col("rank") <= top)


def heatmap(cycles: DataFrame) -> DataFrame:
    """Per (cluster, group, hour of day UTC): the p95 time lag (ms) and the breach time."""
    return cycles.withColumn("hour_of_day", F.hour("ts")) \
        .groupBy("cluster", "group", "hour_of_day").agg(
            F.percentile_approx("lag_ms", 0.95, ACCURACY).alias("lag_ms_p95"),
            F.sum(F.when(_breach(), F.col("interval_ms")).otherwise(0)).alias("breach_ms"))


def timeline(cycles: DataFrame, groups: Sequence[tuple[str, str]], bucket_ms: int) -> DataFrame:
    """The worst time lag and message lag of each of `groups` (cluster, group) per
    `bucket_ms` bucket, for the lag-over-time chart."""
    if not groups:
        return cycles.limit(0).select("cluster", "group", F.lit(0).alias("bucket"),
                                      "lag_ms", "lag")
    wanted = F.lit(False)
    for cluster, group in groups:
        wanted = wanted | ((F.col("cluster") == cluster) & (F.col("group") == group))
    epoch_ms = F.unix_millis(F.col("ts"))
    return cycles.filter(wanted) \
        .withColumn("bucket", (F.floor(epoch_ms / bucket_ms) * bucket_ms).cast("bigint")) \
        .groupBy("cluster", "group", "bucket") \
        .agg(F.max("lag_ms").alias("lag_ms"), F.max("lag").alias("lag"))

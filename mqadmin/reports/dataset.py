"""The lag history as Spark reads it: the Parquet contract, the date-pruned read, and the
per-cycle series (queue rows summed per topic and per group) every figure starts from.

How this works: the monitor writes one row per (cycle, group, topic, broker, queue) under
``lag-history/date=YYYY-MM-DD/``.  `read` filters on the ``date`` partition column first,
so Spark lists and opens only the period's directories (the physical plan shows them as
``PartitionFilters``), then on ``ts``.  A cycle of a group (or of a topic) is the sum of
its queues' lag in messages and the maximum of their lag in time; rows with ``ok = false``
are gaps, kept apart, and never count as samples nor as breaches.  Files written before a
column of the schema existed read it as its default (schema.py: ``in_flight`` 0).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from . import schema as sample_schema
from .period import Period

#: The columns a reader relies on: the lag sample schema's history columns, in their order.
COLUMNS = sample_schema.NAMES
QUEUE_KEY = ("cluster", "group", "topic", "broker", "queue_id")


class DatasetError(ValueError):
    """The input is not a readable lag history."""


def schema() -> str:
    """The history's columns plus the ``date`` partition, as a Spark DDL string: given
    explicitly, so Spark opens no file outside the period to infer it."""
    return sample_schema.spark_ddl()


def read(spark: SparkSession, path: str, periods: list[Period]) -> DataFrame:
    """The rows of `periods` from the dataset at `path` (a local path or any URI Spark
    reads: hdfs://, s3a://, ...), reading only their date partitions.

    Raises:
        DatasetError: the path holds no Parquet dataset.
    """
    from pyspark.errors import AnalysisException

    try:
        df = spark.read.schema(schema()).option("basePath", path).parquet(path)
    except AnalysisException as exc:
        first = str(exc).strip().splitlines()[0]
        raise DatasetError(f"cannot read the lag history at {path}: {first}. Point --input "
                           "at the monitor's lag-history folder (`mqadmin lag collect` "
                           "writes it).") from None
    dates = sorted({d for p in periods for d in p.dates()})
    in_time = None
    for p in periods:
        cond = (F.col("ts") >= F.lit(p.start)) & (F.col("ts") < F.lit(p.end))
        in_time = cond if in_time is None else in_time | cond
    assert in_time is not None
    return df.filter(F.col("date").isin(dates)).filter(in_time).select(*(
        F.coalesce(F.col(c), F.lit(sample_schema.DEFAULTS[c])).alias(c)
        if c in sample_schema.DEFAULTS else F.col(c) for c in COLUMNS))


def in_period(df: DataFrame, period: Period) -> DataFrame:
    """The rows of `df` whose ``ts`` lies in `period`."""
    return df.filter((F.col("ts") >= F.lit(period.start)) & (F.col("ts") < F.lit(period.end)))


def _cycle_aggs() -> list[Column]:
    return [
        F.sum("lag").alias("lag"),
        F.sum("in_flight").alias("in_flight"),
        F.max("lag_ms").alias("lag_ms"),
        F.max("interval_ms").alias("interval_ms"),
        F.max(F.col("retention_risk").cast("int")).alias("risk"),
        F.sum(F.when(F.col("retention_risk"), F.col("risk_messages")).otherwise(0))
        .alias("risk_messages"),
        F.max((F.col("lag") > 0).cast("int")).alias("lagging"),
    ]


def cycles(rows: DataFrame) -> DataFrame:
    """One row per (cluster, group, topic, ts): lag summed over the queues, the worst time
    lag, the interval, whether any queue was at retention risk and how many messages,
    whether any queue lagged, and ``gap`` (1 for the gap rows, whose topic is empty).  One
    pass over the samples feeds every figure but the verdicts."""
    return rows.groupBy("cluster", "group", "topic", "ts").agg(
        *_cycle_aggs(), F.max((~F.col("ok")).cast("int")).alias("gap"))


def of_groups(df: DataFrame, groups: list[tuple[str, str]]) -> DataFrame:
    """The rows of `df` whose (cluster, group) is one of `groups` (a short list the driver
    knows: a filter on the names, then a broadcast semi-join on the pairs)."""
    wanted = df.sparkSession.createDataFrame(groups, "cluster string, `group` string")
    return df.filter(F.col("group").isin(sorted({g for _, g in groups}))) \
        .join(F.broadcast(wanted), ["cluster", "group"], "left_semi")

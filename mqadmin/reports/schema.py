"""The lag sample's one schema: each field, its type, and where it is kept (the monitor's
SQLite window, the Parquet history the report job reads).

How this works: `FIELDS` declares every field of a sample once.  The monitor's window
(mqadmin/operations/lag/window.py) makes its table, its rows and its `QueueSample`s from
the fields it keeps (`WINDOW`); the history writer (lag/history.py) writes the columns of
`HISTORY` in their order; the report job reads the history by `NAMES`, `spark_ddl` and
`DEFAULTS`.  This module imports only the standard library (pyarrow inside
`arrow_schema`), so the job ships it in its bundle (bundle.py zips this package alone and
cannot carry mqadmin.operations) and the monitor imports it from here.

Adding a field is one `Field` line (plus the `QueueSample` attribute that holds it) and its
migration, the field's `default`: a window made before the field gets the column added
(`window.open_db`) and its old rows read the default, and history files written before it
lack the column and the job reads the default (`dataset.read`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Where a history row's value comes from: the sample (``QueueSample.<name>``), the cycle
#: (``Cycle.<name>``), or nowhere (a sample row is `OK_ROW`, a gap row its `gap`).
SAMPLE, CYCLE, ROW = "sample", "cycle", "row"
#: The value of the ``ok`` column in a sample row (a gap row has ``ok = false``).
OK_ROW = True

#: Spark's type names (the history's) as SQLite column types (the window's).
SQLITE_TYPES: dict[str, type] = {"timestamp": int, "string": str, "int": int, "bigint": int,
                                 "double": float, "boolean": int}


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a lag sample.

    Attributes:
        name: the sample's attribute (`source` SAMPLE) or the cycle's (CYCLE), and the
            history's column.
        kind: Spark's type name; `arrow_schema` maps it to Arrow's, `SQLITE_TYPES` to
            SQLite's.
        nullable: may be null in the history (gap rows leave the measured values null).
        source: SAMPLE, CYCLE or ROW (the ``ok`` column).
        window: its column in the SQLite window; "" for `name`, None when not kept there.
        history: a column of the history files.
        gap: its value in a history gap row, unless `gap_own`.
        gap_own: a gap row takes the gap's own value (``Gap.<name>``).
        default: what a window row or history file from before the field reads as (None:
            the field was always there).
    """

    name: str
    kind: str
    nullable: bool = False
    source: str = SAMPLE
    window: str | None = ""
    history: bool = True
    gap: Any = None
    gap_own: bool = False
    default: Any = None

    @property
    def column(self) -> str:
        """Its column in the SQLite window."""
        return self.window or self.name


#: Every field, in the history's column order (the ``date`` partition is the folder,
#: ``date=YYYY-MM-DD``).  A gap row (a group x broker that could not be sampled) has
#: ``ok = false``, queue -1, an empty topic and nulls in the measured columns.
FIELDS = (
    Field("ts", "timestamp", gap_own=True),  # the cycle's sample time, UTC, milliseconds
    Field("cluster", "string", source=CYCLE),
    Field("group", "string", window="consumer_group", gap_own=True),
    Field("topic", "string", gap=""),
    Field("broker", "string", gap_own=True),
    Field("queue_id", "int", gap=-1),
    Field("broker_offset", "bigint", True),
    Field("consumer_offset", "bigint", True),
    Field("lag", "bigint", True),
    Field("lag_ms", "bigint", True),
    Field("produce_rate", "double", True),
    Field("consume_rate", "double", True),
    Field("commit_ts", "bigint", history=False),  # when the offset was last committed
    Field("oldest_phys", "bigint", True, history=False),  # the oldest unread message's
    Field("interval_ms", "int", source=CYCLE, window=None),
    Field("ok", "boolean", source=ROW, window=None, gap=False),
    Field("retention_risk", "boolean", gap=False),
    Field("risk_messages", "bigint", gap=0, default=0),
    Field("in_flight", "bigint", True, default=0),  # POP: taken, not acked yet
)
#: The fields the monitor's SQLite window keeps, and those the history files hold.
WINDOW = tuple(f for f in FIELDS if f.window is not None)
HISTORY = tuple(f for f in FIELDS if f.history)
#: The history's columns in file order.
NAMES = tuple(f.name for f in HISTORY)
#: Columns a file written before them may lack: a reader fills them with these values.
DEFAULTS = {f.name: f.default for f in HISTORY if f.default is not None}


def arrow_schema() -> Any:
    """The pyarrow schema of one lag-history file (pyarrow is imported here, on use)."""
    import pyarrow as pa

    types = {"timestamp": pa.timestamp("ms", tz="UTC"), "string": pa.string(),
             "int": pa.int32(), "bigint": pa.int64(), "double": pa.float64(),
             "boolean": pa.bool_()}
    return pa.schema([pa.field(f.name, types[f.kind], nullable=f.nullable) for f in HISTORY])


def spark_ddl() -> str:
    """The history's columns plus the ``date`` partition as a Spark DDL string."""
    return ", ".join([f"`{f.name}` {f.kind}" for f in HISTORY] + ["`date` string"])

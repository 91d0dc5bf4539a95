"""The lag history's Arrow schema (the contract with the lag monitor, docs/lag.md), for
writers of test and benchmark data; readers check the same columns in dataset.py."""

from __future__ import annotations

from typing import Any


def arrow_schema() -> Any:
    """pyarrow schema of one lag-history file (the ``date`` partition is the folder)."""
    import pyarrow as pa

    return pa.schema([
        ("ts", pa.timestamp("ms", tz="UTC")), ("cluster", pa.string()),
        ("group", pa.string()), ("topic", pa.string()), ("broker", pa.string()),
        ("queue_id", pa.int32()), ("broker_offset", pa.int64()),
        ("consumer_offset", pa.int64()), ("lag", pa.int64()), ("lag_ms", pa.int64()),
        ("produce_rate", pa.float64()), ("consume_rate", pa.float64()),
        ("interval_ms", pa.int32()), ("ok", pa.bool_()), ("retention_risk", pa.bool_()),
        ("risk_messages", pa.int64()),
    ])

"""The demo orders consumer deduplicates by order key: an `--again` redrive of an order it
already consumed is acknowledged without running the listener twice."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from engine.client.consume.dedupe import Dedupe
from engine.client.consume.dedupe_sqlite import SqliteKeyStore
from mqadmin.dev.traffic import Counts, PoisonRule, order_consumer

from .cli import invoke, json_rows
from .conftest import BackgroundCluster


def wait_until(done: Callable[[], object], what: str) -> None:
    """Poll `done` (CLI calls, counters moved by the cluster's loop) for up to 60 s."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(0.05)  # retries and redrives arrive by the broker's clock: poll
    raise AssertionError(f"not within 60 s: {what}")


def test_a_second_redrive_of_a_consumed_order_is_not_run_again(
        short_retries: BackgroundCluster, tmp_path: Path) -> None:
    cluster = short_retries
    cluster.create_topic("DemoOrders", queues=1)
    cluster.create_group("demo-consumer", retry_max_times=1)
    cluster.send("DemoOrders", b"poison", keys="order-7")
    counts = Counts()
    store = SqliteKeyStore(tmp_path / "keys.db")
    consumer = order_consumer(cluster.ns, counts, PoisonRule(times=2), max_retries=1,
                              dedupe=Dedupe(store))
    cluster.call(consumer.start())
    try:
        wait_until(lambda: json_rows("dlq", "list", "-n", cluster.ns), "a dead letter")
        assert invoke("dlq", "resend", "-g", "demo-consumer", "-n", cluster.ns,
                      "--yes").exit_code == 0
        wait_until(lambda: counts.redriven == 1, "the redrive consumed")
        assert invoke("dlq", "resend", "-g", "demo-consumer", "-n", cluster.ns, "--again",
                      "--yes").exit_code == 0

        def both_consumed() -> bool:
            # the consumer commits an acknowledged offset with its next pull or on its
            # persist timer (first run 10 s after start, as Apache's): commit it now
            cluster.call(consumer.persist_offsets())
            rows = json_rows("dlq", "status", "-n", cluster.ns)
            return len(rows) == 2 and all(r["consumed"] == 1 for r in rows)

        wait_until(both_consumed, "the second redrive acknowledged")
        assert (counts.consumed, counts.redriven) == (1, 1)
    finally:
        cluster.call(consumer.shutdown())
        cluster.call(store.close())

"""The Apache C++ client's send-back retries and orderly consumption against our broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.broker.topics import retry_topic
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.protocol.message import decode_records
from tests.broker.conftest import broker_configs
from tests.compat.test_cpp_broker import run_driver
from tests.compat.test_cpp_namesrv import pytestmark as cpp_available
from tests.conftest import namesrv_config

pytestmark = cpp_available
COUNT = 6


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[str, BrokerController]]:
    ns = NamesrvController(namesrv_config(tmp_path))
    await ns.start()
    # Retries use level 3 + reconsumeTimes.  Zero-second levels still park each retry in
    # SCHEDULE_TOPIC_XXXX and restore it into %RETRY%<group>, without the wait: the C++ client
    # sends back the whole pulled batch when one message fails, so the six messages come back
    # over several rounds, one delay each.
    config, store = broker_configs(tmp_path, f"127.0.0.1:{ns.port}",
                                   message_delay_level="0s 0s 0s 0s")
    broker = BrokerController(config, store)
    await broker.start()
    broker.state.topics.put(TopicConfig("CppRetry", 2, 2))
    broker.state.topics.put(TopicConfig("CppOrderly", 2, 2))
    # The C++ client asks for the route of %RETRY%<group> when it starts, before its first
    # heartbeat makes the broker create that topic, and asks again only at its 10 s
    # rebalance; made here first, as an earlier run of the group would have left it.
    broker.state.topics.put(TopicConfig(retry_topic("CppRetryGroup"), 1, 1))
    await broker.registration.register_all()
    try:
        yield f"127.0.0.1:{ns.port}", broker
    finally:
        await broker.stop()
        await ns.stop()


async def test_cpp_consumer_failures_come_back_through_the_retry_topic(
        cluster: tuple[str, BrokerController], tmp_path: Path) -> None:
    addr, broker = cluster
    await run_driver(tmp_path, "produce", addr, "CppRetry", str(COUNT), "sync")
    lines = await run_driver(tmp_path, "push-retry", addr, "CppRetry", "CppRetryGroup",
                             str(COUNT))
    failed = [r["failed"] for r in lines if isinstance(r.get("failed"), dict)]
    taken = [r["received"] for r in lines if isinstance(r.get("received"), dict)]
    want = {f"cpp-sync-{i}" for i in range(COUNT)}
    assert {f["body"] for f in failed} == want  # type: ignore[index]
    assert {t["body"] for t in taken} == want  # type: ignore[index]
    for record in taken:
        assert record["topic"] == "CppRetry"  # type: ignore[index]  # client restores it
        assert record["reconsume"] >= 1  # type: ignore[index]
        i = int(record["seq"])  # type: ignore[index]
        assert (record["keys"], record["tags"]) == (f"key-{i}", f"Tag{i % 2}")  # type: ignore[index]
    # The retries went through %RETRY%<group>, each keeping its UNIQ_KEY and origin.
    store = broker.state.store
    retried = store.get_message("t", "%RETRY%CppRetryGroup", 0, 0, 32)
    records = [r for chunk in retried.messages for r in decode_records(chunk)]
    assert len(records) >= COUNT
    assert all(r.properties()["RETRY_TOPIC"] == "CppRetry" for r in records)
    assert all("ORIGIN_MESSAGE_ID" in r.properties() for r in records)


async def test_cpp_orderly_consumer_retries_in_place(
        cluster: tuple[str, BrokerController], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    addr, broker = cluster
    locks = broker.state.locks
    granted: list[str] = []
    real_lock = locks.try_lock_batch

    def recording_lock(group: str, queues: object, client_id: str) -> object:
        result = real_lock(group, queues, client_id)  # type: ignore[arg-type]
        granted.extend(f"{mq.topic}:{mq.queue_id}" for mq in result)
        return result
    monkeypatch.setattr(locks, "try_lock_batch", recording_lock)
    sent = await run_driver(tmp_path, "produce-orderly", addr, "CppOrderly", str(COUNT))
    assert sum(1 for r in sent if "sent" in r) == COUNT
    lines = await run_driver(tmp_path, "push-orderly", addr, "CppOrderly", "CppOrderlyGroup",
                             str(COUNT))
    received = [r["received"] for r in lines if isinstance(r.get("received"), dict)]
    by_queue: dict[int, list[int]] = {}
    for record in received:
        by_queue.setdefault(int(record["queue"]), []).append(int(record["seq"]))  # type: ignore[index]
    # Each queue is consumed in send order, the failed message 3 included, exactly once.
    for seqs in by_queue.values():
        assert seqs == sorted(seqs)
    assert sorted(s for seqs in by_queue.values() for s in seqs) == list(range(COUNT))
    assert {i % 2 for seqs in by_queue.values() for i in seqs} == {0, 1}
    assert [r["failed"]["seq"] for r in lines if "failed" in r] == ["3"]  # type: ignore[index]
    # Orderly failures are retried by the client, never sent back to %RETRY%.
    assert broker.state.store.get_max_offset_in_queue("%RETRY%CppOrderlyGroup", 0) == 0
    # The consumer locked both queues (LOCK_BATCH_MQ) before consuming them.
    assert {"CppOrderly:0", "CppOrderly:1"} <= set(granted)

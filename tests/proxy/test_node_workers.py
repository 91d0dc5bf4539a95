"""The official Node.js client through the proxy as 2 worker processes (workers.py): sends,
receives and acks; an orphaned transaction checked through the worker of its stream."""

from __future__ import annotations

from pathlib import Path

from engine.namesrv.controller import NamesrvController
from tests.proxy.conftest import stored
from tests.proxy.nodejs import NodeClient
from tests.proxy.workers import running_workers

GROUP = "NodeWorkersGroup"


def of(events: list[dict[str, object]], event: str) -> list[dict[str, object]]:
    return [e for e in events if e["event"] == event]


async def test_node_sends_receives_and_acks_through_two_workers(
        tmp_path: Path, namesrv: NamesrvController, node_client: NodeClient) -> None:
    async with running_workers(tmp_path, namesrv, topics={"NodeSpread": None}) as w:
        assert len(w.proxy.pids) == 2
        sent = of(await node_client.run(
            "producer.js", endpoint=w.endpoint, topic="NodeSpread",
            messages=[{"body": f"n-{i}", "tag": "TagA"} for i in range(4)]), "sent")
        ids = sorted(str(e["messageId"]) for e in sent)
        assert len(ids) == 4
        events = await node_client.run("receive_ack.js", endpoint=w.endpoint,
                                       topic="NodeSpread", group=GROUP, tag="TagA",
                                       awaitMs=1000, count=4, after=False)
        assert sorted(str(m["messageId"]) for m in of(events, "received")) == ids
        assert sorted(str(a["messageId"]) for a in of(events, "acked")) == ids


async def test_node_orphaned_transaction_is_checked_through_its_worker(
        tmp_path: Path, namesrv: NamesrvController, node_client: NodeClient) -> None:
    async with running_workers(tmp_path, namesrv, topics={"NodeOrphan": "TRANSACTION"},
                               transaction_time_out=0, transaction_check_interval=200) as w, \
            node_client.start("transaction.js", endpoint=w.endpoint, topic="NodeOrphan",
                              orphan=True) as scenario:
        receipt = await scenario.next("sent")
        checked = await scenario.next("checked", timeout=30)
        record = await stored(w, "NodeOrphan", str(receipt["messageId"]),  # type: ignore
                              timeout=30)
        await scenario.finish()
    assert checked["messageId"] == receipt["messageId"]
    assert record.body == b"decide later"

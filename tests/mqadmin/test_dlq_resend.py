"""dlq resend (to retry and to topic, --again), discard, status, export/import."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from engine.client.admin import MQAdmin
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.topic import TopicConfig
from engine.protocol.perm import PERM_READ, PERM_RW, PERM_WRITE
from mqadmin import history
from mqadmin.exit_codes import ExitCode
from mqadmin.operations.dlq.model import BATCH_PROPERTY, LINK_PROPERTY
from tests.mqadmin.cli import invoke, json_rows, rows_of
from tests.mqadmin.conftest import BackgroundCluster
from tests.mqadmin.dlq_helpers import bury, consume, setup_group, stop


@pytest.mark.parametrize("perm", [PERM_RW, PERM_WRITE])
def test_resend_to_retry_then_topic(cluster: BackgroundCluster, perm: int) -> None:
    setup_group(cluster, "g1", "Orders", dlq_perm=perm)
    cluster.create_group("g2")
    dead = bury(cluster, "g1", "Orders", 4)
    c1, got1 = consume(cluster, "g1", "Orders")
    c2, got2 = consume(cluster, "g2", "Orders")
    try:
        plan = invoke("dlq", "resend", "-n", cluster.ns, "-g", "g1", "--dry-run", "-o", "json")
        assert plan.exit_code == 0, plan.stderr
        assert json.loads(plan.stdout) == [{"originTopic": "Orders", "deadLetters": 4,
                                            "target": "%RETRY%g1", "alsoReceivedBy": None}]
        sent = rows_of(invoke("dlq", "resend", "-n", cluster.ns, "-g", "g1", "--yes",
                              "-o", "json"))
        assert sent[0]["sent"] == 4 and sent[0]["failed"] == 0
        batch = sent[0]["batch"]
        cluster.call(got1.wait_linked(4))
        copies = got1.linked()
        assert sorted(m.properties["ORIGIN_MESSAGE_ID"] for m in copies) == sorted(dead)
        first = min(copies, key=lambda m: m.keys)
        assert (first.topic, first.keys, first.tags, first.reconsume_times) == (
            "Orders", ("order-0",), "TagA", 0)
        assert first.body == b'{"order": 0, "reason": "bad-price"}'
        assert (first.properties["tenant"], first.properties["trace"]) == ("t0", "x\u00e9y")
        assert first.properties[BATCH_PROPERTY] == batch
        # a second resend skips them; --again sends them once more
        again = invoke("dlq", "resend", "-n", cluster.ns, "-g", "g1", "--yes")
        assert again.exit_code == 0 and "already resent" in again.stderr
        shown = json_rows("dlq", "show", "-n", cluster.ns, "-g", "g1")
        assert {r["triage"] for r in shown} == {"resent"}
        listed = json_rows("dlq", "list", "-n", cluster.ns)
        assert (listed[0]["deadLetters"], listed[0]["unhandled"]) == (4, 0)
        # --to topic: g2 receives the copies too, and named in the plan
        plan = invoke("dlq", "resend", "-n", cluster.ns, "-g", "g1", "--to", "topic",
                      "--again", "--key", "order-1", "--dry-run", "-o", "json")
        assert json.loads(plan.stdout)[0]["alsoReceivedBy"] == "g2"
        rows_of(invoke("dlq", "resend", "-n", cluster.ns, "-g", "g1", "--to", "topic",
                       "--again", "--key", "order-1", "--yes", "-o", "json"))
        cluster.call(got2.wait_linked(1))
        cluster.call(got1.wait_linked(5))
        assert [m.keys for m in got2.linked()] == [("order-1",)]
        assert all(m.properties[BATCH_PROPERTY] != batch for m in got2.linked())
        status = json_rows("dlq", "status", "-n", cluster.ns, batch)
        assert (status[0]["sent"], status[0]["failed"], status[0]["backInDlq"]) == (4, 0, 0)
        for _ in range(100):
            if status[0]["consumed"] == 4:
                break
            cluster.call(got1.wait_linked(5))
            status = json_rows("dlq", "status", "-n", cluster.ns, batch)
        assert (status[0]["consumed"], status[0]["pending"]) == (4, 0)
    finally:
        stop(cluster, c1)
        stop(cluster, c2)


def test_discard(cluster: BackgroundCluster) -> None:
    setup_group(cluster, "g1", "Orders")
    bury(cluster, "g1", "Orders", 3)
    result = invoke("dlq", "discard", "-n", cluster.ns, "-g", "g1", "--tag", "TagA",
                    "--reason", "known bad prices")
    assert result.exit_code == 2 and "--yes" in result.stderr
    assert rows_of(invoke("dlq", "discard", "-n", cluster.ns, "-g", "g1", "--tag", "TagA",
                          "--reason", "known bad prices", "--yes", "-o", "json")
                   )[0]["discarded"] == 2
    shown = json_rows("dlq", "show", "-n", cluster.ns, "-g", "g1")
    assert [r["triage"] for r in shown] == ["discarded", "unhandled", "discarded"]
    assert json_rows("dlq", "list", "-n", cluster.ns)[0]["unhandled"] == 1
    plan = json_rows("dlq", "resend", "-n", cluster.ns, "-g", "g1", "--dry-run")
    assert plan[0]["deadLetters"] == 1
    assert json_rows("dlq", "status", "-n", cluster.ns)[0]["action"] == "discard"


def test_export_import_round_trip(cluster: BackgroundCluster, tmp_path: Path) -> None:
    setup_group(cluster, "g1", "Orders")
    bury(cluster, "g1", "Orders", 2)
    bury(cluster, "g1", "Orders", 1, start=2, body=bytes(range(256)))
    cluster.create_topic("Replay", queues=1)
    file = tmp_path / "dead.jsonl"
    result = invoke("dlq", "export", "-n", cluster.ns, "-g", "g1", "-f", str(file))
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in file.read_text().splitlines()]
    assert len(lines) == 3
    assert base64.b64decode(lines[2]["body"]) == bytes(range(256)) and "bodyText" not in lines[2]
    assert lines[0]["bodyText"] == '{"order": 0, "reason": "bad-price"}'
    to_replay = ("dlq", "import", "-n", cluster.ns, "-f", str(file), "--to-topic", "Replay",
                 "-o", "json")
    assert json_rows(*to_replay, "--dry-run") == [
        {"file": str(file), "topic": "Replay", "messages": 3,
         "bodyBytes": sum(len(base64.b64decode(line["body"])) for line in lines)}]
    unasked = invoke(*to_replay)  # no terminal to ask on, no --yes: nothing sent
    assert unasked.exit_code == ExitCode.USAGE and "--yes" in unasked.stderr
    assert json_rows("printMsg", "-n", cluster.ns, "-t", "Replay") == []
    nowhere = invoke("dlq", "import", "-n", cluster.ns, "-f", str(file), "--to-topic",
                     "NoSuchTopic", "--yes")
    assert nowhere.exit_code == ExitCode.NOT_FOUND and "updateTopic" in nowhere.stderr
    assert history.records(command="dlq import") == []  # refused at the plan: no record
    imported = rows_of(invoke(*to_replay, "--yes"))
    assert imported == [{"topic": "Replay", "total": 3, "sent": 3, "failed": 0, "verified": 3}]
    [record] = history.records(command="dlq import", detail=True)
    assert (record["outcome"], record["target"], record["result"]) == (
        "applied", "Replay", imported)
    replayed = json_rows("printMsg", "-n", cluster.ns, "-t", "Replay")
    assert [r["keys"] for r in replayed] == ["order-0", "order-1", "order-2"]

    async def stored(admin: MQAdmin) -> list[tuple[bytes, dict[str, str]]]:
        pulled = await admin.broker.pull_records(cluster.broker_addr,
                                                 MessageQueue("Replay", "broker-a", 0), 0)
        return [(r.body, r.properties()) for r in pulled.records]
    copies = cluster.admin_call(stored)
    for line, (body, props) in zip(lines, copies, strict=True):  # byte for byte
        assert body == base64.b64decode(line["body"])
        for name in ("KEYS", "TAGS", "tenant", "trace"):
            assert props[name] == line["properties"][name]
    detail = json_rows("queryMsgByOffset", "-n", cluster.ns, "-t", "Replay", "-b", "broker-a",
                       "-i", "0", "-o", "2")
    props = detail[0]["properties"]
    assert (props["tenant"], props["trace"], props["TAGS"]) == ("t2", "x\u00e9y", "TagA")
    assert LINK_PROPERTY not in props
    again = tmp_path / "again.jsonl"
    assert invoke("dlq", "export", "-n", cluster.ns, "-g", "g1", "-f", str(again)).exit_code == 0
    (tmp_path / "bad.jsonl").write_text(file.read_text() + "{not json\n")
    bad = invoke("dlq", "import", "-n", cluster.ns, "-f", str(tmp_path / "bad.jsonl"),
                 "--to-topic", "Replay", "--yes")
    assert bad.exit_code == 2 and "line 4" in bad.stderr


def test_an_import_with_a_message_the_producer_refuses_is_partial_and_audited(
        cluster: BackgroundCluster, tmp_path: Path) -> None:
    cluster.create_topic("Replay", queues=1)
    file = tmp_path / "dead.jsonl"
    lines = [{"body": base64.b64encode(body).decode("ascii"), "keys": [key]}
             for key, body in (("small", b"ok"), ("huge", b"x" * (4 * 1024 * 1024 + 1)))]
    file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = invoke("dlq", "import", "-n", cluster.ns, "-f", str(file), "--to-topic",
                    "Replay", "--yes", "-o", "json")
    assert result.exit_code == ExitCode.PARTIAL, result.stderr
    assert rows_of(result) == [{"topic": "Replay", "total": 2, "sent": 1, "failed": 1,
                                "verified": 1}]
    assert "not sent or not read back" in result.stderr and "line" in result.stderr
    [record] = history.records(command="dlq import", detail=True)
    assert (record["outcome"], record["exitCode"]) == ("partial", ExitCode.PARTIAL)
    assert [r["keys"] for r in json_rows("printMsg", "-n", cluster.ns, "-t", "Replay")] == [
        "small"]


def test_resend_by_ids_file(cluster: BackgroundCluster, tmp_path: Path) -> None:
    setup_group(cluster, "g1", "Orders")
    bury(cluster, "g1", "Orders", 3)
    shown = json_rows("dlq", "show", "-n", cluster.ns, "-g", "g1")
    ids = tmp_path / "ids.txt"
    ids.write_text(f"# picked from dlq show\n{shown[1]['msgId']}\nbroker-a:0:2\n")
    plan = json_rows("dlq", "resend", "-n", cluster.ns, "-g", "g1", "--ids", str(ids),
                     "--dry-run")
    assert plan[0]["deadLetters"] == 2
    (tmp_path / "empty.txt").write_text("\n")
    empty = invoke("dlq", "resend", "-n", cluster.ns, "-g", "g1", "--ids",
                   str(tmp_path / "empty.txt"), "--yes")
    assert empty.exit_code == 2 and "names no dead letter" in empty.stderr
    unknown = invoke("dlq", "resend", "-n", cluster.ns, "--resume", "nope", "--yes")
    assert unknown.exit_code == 3 and "dlq status" in unknown.stderr


def test_partial_resend_then_resume(cluster: BackgroundCluster) -> None:
    """Sends the broker refuses are failures: exit 6, the ledger says which; --resume sends
    them once the cause is fixed."""
    setup_group(cluster, "g1", "Orders")
    bury(cluster, "g1", "Orders", 2)
    cluster.create_topic("Frozen", queues=1)
    bury(cluster, "g1", "Frozen", 1, start=2)

    def frozen_perm(perm: int) -> None:
        async def set_perm(admin: MQAdmin) -> None:
            await admin.broker.create_topic(cluster.broker_addr,
                                            TopicConfig("Frozen", 1, 1, perm))
        cluster.admin_call(set_perm)

    frozen_perm(PERM_READ)
    result = invoke("dlq", "resend", "-n", cluster.ns, "-g", "g1", "--to", "topic", "--yes",
                    "-o", "json")
    assert result.exit_code == ExitCode.PARTIAL, result.stderr
    [row] = json.loads(result.stdout)
    assert (row["sent"], row["failed"]) == (2, 1)
    assert "--resume " + row["batch"] in result.stderr
    [status] = json_rows("dlq", "status", "-n", cluster.ns, row["batch"])
    assert (status["sent"], status["failed"]) == (2, 1)
    shown = json_rows("dlq", "show", "-n", cluster.ns, "-g", "g1", "--topic", "Frozen")
    assert shown[0]["triage"] == "unhandled"
    frozen_perm(PERM_RW)
    resumed = rows_of(invoke("dlq", "resend", "-n", cluster.ns, "--resume", row["batch"],
                             "-o", "json"))
    assert (resumed[0]["sent"], resumed[0]["failed"]) == (3, 0)
    copies = json_rows("printMsg", "-n", cluster.ns, "-t", "Frozen")
    assert [r["keys"] for r in copies] == ["order-2", "order-2"]  # the original and one copy

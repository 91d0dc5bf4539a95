"""Finding messages on a live cluster: printMsg over a time range and in pages,
printMsgByQueue's tag counts, one id wherever an id is asked for (offset message id or unique
key, and the error when it is neither); what a unique key says about its producer."""

from __future__ import annotations

import datetime as dt
import time

from engine.client.ids import UniqIdGenerator
from engine.client.results import SendResult
from engine.protocol.message import create_offset_msg_id
from mqadmin.exit_codes import ExitCode
from mqadmin.operations.messages.ids import decode_unique_key

from .cli import invoke, json_rows, rows_of
from .conftest import BackgroundCluster


def now_ms() -> int:
    return int(time.time() * 1000)


def past(ms: int) -> int:
    """Wait for the clock to pass `ms` (messages sent after are stored at a later ms);
    returns the first ms after it."""
    while now_ms() <= ms:
        time.sleep(0.0005)
    return now_ms()


def send_all(cluster: BackgroundCluster, topic: str, names: list[str], *, queue_id: int = 0,
             tags: str | None = None) -> list[SendResult]:
    return [cluster.send(topic, n.encode(), queue_id=queue_id, tags=tags, keys=n)
            for n in names]


def test_print_msg_over_a_time_range(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Clicks", queues=2)
    for q in (0, 1):
        send_all(cluster, "Clicks", [f"early-{q}"], queue_id=q)
    begin = past(now_ms())
    for q in (0, 1):
        send_all(cluster, "Clicks", [f"inside-{q}-{n}" for n in range(2)], queue_id=q)
    end = past(now_ms())
    for q in (0, 1):
        send_all(cluster, "Clicks", [f"late-{q}"], queue_id=q)

    rows = json_rows("printMsg", "-t", "Clicks", "-b", str(begin), "-e", str(end),
                     "-n", cluster.ns)
    assert [r["body"] for r in rows] == ["inside-0-0", "inside-0-1", "inside-1-0", "inside-1-1"]
    assert [(r["queueId"], r["queueOffset"]) for r in rows] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert all(r["keys"] == r["body"] for r in rows)
    no_body = json_rows("printMsg", "-t", "Clicks", "-b", str(begin), "-e", str(end),
                        "-d", "false", "-n", cluster.ns)
    assert [r["body"] for r in no_body] == [None] * 4
    assert [r["msgId"] for r in no_body] == [r["msgId"] for r in rows]
    from_begin = json_rows("printMsg", "-t", "Clicks", "-b", str(begin), "-n", cluster.ns)
    assert sorted(r["body"] for r in from_begin) == sorted(
        [r["body"] for r in rows] + ["late-0", "late-1"])
    table = invoke("printMsg", "-t", "Clicks", "-e", str(begin), "-n", cluster.ns)
    assert table.exit_code == 0 and "early-0" in table.stdout and "inside" not in table.stdout


def test_print_msg_pages(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Clicks", queues=2)
    send_all(cluster, "Clicks", ["a0", "a1", "a2"], queue_id=0)
    send_all(cluster, "Clicks", ["b0", "b1"], queue_id=1)
    first = invoke("printMsg", "-t", "Clicks", "--limit", "2", "-n", cluster.ns, "-o", "json")
    assert [r["body"] for r in rows_of(first)] == ["a0", "a1"]
    assert "--after broker-a:0:1" in first.stderr  # the next page's start, on stderr only
    second = invoke("printMsg", "-t", "Clicks", "--limit", "2", "--after", "broker-a:0:1",
                    "-n", cluster.ns, "-o", "json")
    assert [r["body"] for r in rows_of(second)] == ["a2", "b0"]
    last = invoke("printMsg", "-t", "Clicks", "--limit", "2", "--after", "broker-a:1:0",
                  "-n", cluster.ns, "-o", "json")
    assert [r["body"] for r in rows_of(last)] == ["b1"] and "--after" not in last.stderr
    exact = invoke("printMsg", "-t", "Clicks", "--limit", "5", "-n", cluster.ns, "-o", "json")
    assert len(rows_of(exact)) == 5 and "--after" not in exact.stderr
    bad = invoke("printMsg", "-t", "Clicks", "--after", "broker-a:7:0", "-n", cluster.ns)
    assert bad.exit_code == ExitCode.USAGE and "topicRoute" in bad.stderr
    garbled = invoke("printMsg", "-t", "Clicks", "--after", "0", "-n", cluster.ns)
    assert garbled.exit_code == ExitCode.USAGE and "BROKER:QUEUE:OFFSET" in garbled.stderr
    queue = invoke("printMsgByQueue", "-t", "Clicks", "-a", "broker-a", "-i", "0", "--limit",
                   "2", "-n", cluster.ns, "-o", "json")
    assert [r["queueOffset"] for r in rows_of(queue)] == [0, 1] and "--after 1" in queue.stderr
    rest = json_rows("printMsgByQueue", "-t", "Clicks", "-a", "broker-a", "-i", "0",
                     "--after", "1", "-d", "true", "-n", cluster.ns)
    assert [r["body"] for r in rest] == ["a2"]


def test_print_msg_by_queue_counts_tags(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Clicks", queues=2)
    for tag in ("TagA", "TagB", "TagA", None, "TagC", "TagA", "TagB"):
        cluster.send("Clicks", b"x", queue_id=0, tags=tag)
    cluster.send("Clicks", b"other queue", queue_id=1, tags="TagZ")
    counts = json_rows("printMsgByQueue", "-t", "Clicks", "-a", "broker-a", "-i", "0", "-f",
                       "true", "-n", cluster.ns)
    assert counts == [{"tag": "TagA", "count": 3}, {"tag": "TagB", "count": 2},
                      {"tag": "TagC", "count": 1}]
    only = json_rows("printMsgByQueue", "-t", "Clicks", "-a", "broker-a", "-i", "0", "-f",
                     "true", "-s", "TagB || TagC", "-n", cluster.ns)
    assert only == [{"tag": "TagB", "count": 2}, {"tag": "TagC", "count": 1}]
    none = json_rows("printMsgByQueue", "-t", "Clicks", "-a", "broker-a", "-i", "0", "-f",
                     "true", "-b", str(past(now_ms())), "-n", cluster.ns)
    assert none == []


def test_query_msg_by_id_takes_either_id_without_a_topic(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=2)
    cluster.create_topic("Other", queues=1)
    send_all(cluster, "Other", ["decoy"])
    sent = cluster.send("Orders", b"the one", queue_id=1, tags="TagA", keys="order-7")
    assert sent.msg_id != sent.offset_msg_id
    [by_offset] = json_rows("queryMsgById", "-i", sent.offset_msg_id, "-n", cluster.ns)
    [by_unique] = json_rows("queryMsgById", "-i", sent.msg_id, "-n", cluster.ns)
    assert by_offset == by_unique
    assert (by_unique["msgId"], by_unique["offsetMsgId"], by_unique["topic"],
            by_unique["body"], by_unique["queueId"]) == (
        sent.msg_id, sent.offset_msg_id, "Orders", "the one", 1)
    [in_topic] = json_rows("queryMsgById", "-i", sent.msg_id, "-t", "Orders", "-n", cluster.ns)
    assert in_topic == by_unique
    both = json_rows("queryMsgById", "-i", f"{sent.msg_id},{sent.offset_msg_id}",
                     "-n", cluster.ns)
    assert [r["offsetMsgId"] for r in both] == [sent.offset_msg_id] * 2
    [by_unique_key] = json_rows("queryMsgByUniqueKey", "-i", sent.offset_msg_id, "-t",
                                "Orders", "-n", cluster.ns)
    assert by_unique_key == by_unique


def test_an_id_that_is_neither_says_why(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=1)
    sent = cluster.send("Orders", b"x")
    host, port = cluster.broker_addr.rsplit(":", 1)
    beyond = create_offset_msg_id((host, int(port)), 10**12)
    result = invoke("queryMsgById", "-i", beyond, "-n", cluster.ns)
    assert result.exit_code == ExitCode.NOT_FOUND and result.stdout == ""
    err = " ".join(result.stderr.split())
    assert f"Tried as an offset message id: broker {cluster.broker_addr} (broker-a) has no " \
           f"message at commit-log offset {10**12}: its commit log holds offsets 0 to" in err
    assert "Tried as a message id (UNIQ_KEY): no broker's index has it in any of the" in err
    assert "queryMsgByKey" in err

    elsewhere = create_offset_msg_id(("10.255.0.1", 10911), 0)
    result = invoke("queryMsgById", "-i", elsewhere, "-t", "Orders", "-n", cluster.ns)
    assert result.exit_code == ExitCode.NOT_FOUND
    err = " ".join(result.stderr.split())
    assert "it names 10.255.0.1:10911, which is not a broker of this cluster" in err
    assert "no broker's index has it in topic 'Orders'" in err
    assert "made by a producer on 10.255.0.1" in err  # what it would say as a unique key

    unknown_key = sent.msg_id[:-4] + ("0000" if not sent.msg_id.endswith("0000") else "0001")
    result = invoke("queryMsgById", "-i", unknown_key, "-n", cluster.ns)
    assert result.exit_code == ExitCode.NOT_FOUND
    assert "which is not a broker of this cluster" in " ".join(result.stderr.split())


def test_a_unique_key_says_who_made_it_and_when() -> None:
    made = dt.datetime(2026, 11, 26, 11, 56, 40, 699000)  # local time, as producers count
    key = UniqIdGenerator(ip="10.1.2.3", pid=4242).next(int(made.timestamp() * 1000))
    assert decode_unique_key(key).describe() == (
        "made by a producer on 10.1.2.3 (pid 4242) on day 26 of a month at 11:56:40.699")
    assert decode_unique_key(key.lower()) == decode_unique_key(key)

"""Message commands through CliRunner against a live cluster, ``-o json`` parsed."""

from __future__ import annotations

import dataclasses

from engine.client.admin import MQAdmin
from mqadmin import history
from mqadmin.exit_codes import ExitCode
from mqadmin.operations.sending import stored_as_sent

from .cli import invoke, json_rows, rows_of
from .conftest import BackgroundCluster


def orders(cluster: BackgroundCluster) -> None:
    """Topic Orders, 2 queues: queue 0 holds order-0..2 (TagA, TagB, TagA), queue 1
    order-3 (TagB)."""
    cluster.create_topic("Orders", queues=2)
    for n, tag in enumerate(("TagA", "TagB", "TagA")):
        cluster.send("Orders", f"order {n}".encode(), queue_id=0, tags=tag, keys=f"order-{n}")
    cluster.send("Orders", b"order 3", queue_id=1, tags="TagB", keys="order-3 shared")


def test_send_message_then_find_it_by_unique_key(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=2)
    args = ("-t", "Orders", "-p", "héllo", "-k", "k1", "-c", "TagZ", "-b", "broker-a", "-i",
            "1", "-n", cluster.ns, "-o", "json")
    [plan] = json_rows("sendMessage", *args, "--dry-run")
    assert plan == {"topic": "Orders", "brokerName": "broker-a", "queueId": 1, "tags": "TagZ",
                    "keys": "k1", "bodyBytes": 6}
    unasked = invoke("sendMessage", *args)  # no terminal to ask on, no --yes
    assert unasked.exit_code == ExitCode.USAGE and "--yes" in unasked.stderr
    assert history.records() == []  # nothing sent, nothing recorded
    result = invoke("sendMessage", *args, "--yes")
    assert result.exit_code == 0, result.stderr
    [sent] = rows_of(result)
    assert (sent["brokerName"], sent["queueId"], sent["sendResult"], sent["queueOffset"],
            sent["verified"]) == ("broker-a", 1, "SEND_OK", 0, True)
    [found] = json_rows("queryMsgByUniqueKey", "-i", sent["msgId"], "-t", "Orders",
                        "-n", cluster.ns)
    assert (found["body"], found["tags"], found["keys"], found["queueId"]) == (
        "héllo", "TagZ", "k1", 1)
    assert found["offsetMsgId"] == sent["offsetMsgId"]
    assert found["properties"]["UNIQ_KEY"] == sent["msgId"]
    [record] = history.records(detail=True)
    assert (record["command"], record["outcome"], record["target"]) == (
        "sendMessage", "applied", "Orders")
    assert record["plan"] == [plan] and record["result"] == [sent]


def test_a_send_is_verified_only_when_read_back_where_it_was_stored(
        cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=1)
    sent = cluster.send("Orders", b"x")
    other = cluster.send("Orders", b"y")

    async def check(admin: MQAdmin) -> list[bool]:
        return [await stored_as_sent(admin, sent, "Orders"),
                await stored_as_sent(admin, sent, "Elsewhere"),  # not in that topic
                await stored_as_sent(admin, dataclasses.replace(  # another message there
                    sent, offset_msg_id=other.offset_msg_id), "Orders"),
                await stored_as_sent(admin, dataclasses.replace(  # not an offset id
                    sent, offset_msg_id="nowhere"), "Orders")]
    assert cluster.admin_call(check) == [True, False, False, False]


def test_send_message_to_a_queue_the_topic_lacks_is_refused_at_the_plan(
        cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=2)
    result = invoke("sendMessage", "-t", "Orders", "-p", "x", "-b", "broker-a", "-i", "7",
                    "--yes", "-n", cluster.ns)
    assert result.exit_code == ExitCode.NOT_FOUND and "topicRoute" in result.stderr
    assert history.records() == []


def test_send_message_refusals(cluster: BackgroundCluster) -> None:
    unknown = invoke("sendMessage", "-t", "NoSuchTopic", "-p", "x", "-n", cluster.ns)
    assert unknown.exit_code == ExitCode.NOT_FOUND and "updateTopic" in unknown.stderr
    cluster.create_topic("Orders", queues=2)
    no_broker = invoke("sendMessage", "-t", "Orders", "-p", "x", "-i", "1", "-n", cluster.ns)
    assert no_broker.exit_code == ExitCode.USAGE


def test_query_msg_by_id(cluster: BackgroundCluster) -> None:
    orders(cluster)
    cluster.create_group("Readers")
    cluster.commit("Readers", "Orders", 0, 2)
    [first] = json_rows("queryMsgByKey", "-t", "Orders", "-k", "order-0", "-n", cluster.ns)
    result = invoke("queryMsgById", "-i", first["msgId"], "-t", "Orders", "-n", cluster.ns)
    assert result.exit_code == 0 and "offsetMsgId" in result.stdout  # one block per message
    [by_unique] = json_rows("queryMsgById", "-i", first["msgId"], "-t", "Orders",
                            "-n", cluster.ns)
    [row] = json_rows("queryMsgById", "-i", by_unique["offsetMsgId"], "-n", cluster.ns)
    assert row == by_unique
    assert (row["topic"], row["body"], row["tags"], row["keys"]) == (
        "Orders", "order 0", "TagA", "order-0")
    assert row["brokerName"] == "broker-a" and row["storeHost"] == cluster.broker_addr
    assert row["tracks"] == "Readers=NOT_ONLINE"
    cluster.consumer_online("Readers", ("Orders",))
    [row] = json_rows("queryMsgById", "-i", by_unique["offsetMsgId"], "-n", cluster.ns)
    assert row["tracks"] == "Readers=CONSUMED"


def test_query_msg_by_id_not_found_or_ambiguous(cluster: BackgroundCluster) -> None:
    orders(cluster)
    unique_like = "0" * 31 + "1"
    missing = invoke("queryMsgById", "-i", unique_like, "-t", "Orders", "-n", cluster.ns)
    assert missing.exit_code == ExitCode.NOT_FOUND and "queryMsgByKey" in missing.stderr
    garbage = invoke("queryMsgById", "-i", "not-an-id", "-n", cluster.ns)
    assert garbage.exit_code == ExitCode.USAGE and "-t" in garbage.stderr


def test_query_msg_by_id_resends_and_consumes_again(cluster: BackgroundCluster) -> None:
    orders(cluster)
    [first] = json_rows("queryMsgByKey", "-t", "Orders", "-k", "order-1", "-n", cluster.ns)
    again = ("queryMsgById", "-i", first["msgId"], "-t", "Orders", "-s", "true",
             "-n", cluster.ns, "-o", "json")
    [plan] = json_rows(*again, "--dry-run")
    assert (plan["msgId"], plan["topic"], plan["tags"], plan["keys"]) == (
        first["msgId"], "Orders", "TagB", "order-1")
    unasked = invoke(*again)
    assert unasked.exit_code == ExitCode.USAGE and "--yes" in unasked.stderr
    assert len(json_rows("queryMsgByKey", "-t", "Orders", "-k", "order-1",
                         "-n", cluster.ns)) == 1  # nothing sent
    resent = invoke(*again, "--yes")
    assert resent.exit_code == 0, resent.stderr
    [copy] = rows_of(resent)
    assert copy["msgId"] != first["msgId"] and copy["verified"] is True
    copies = json_rows("queryMsgByKey", "-t", "Orders", "-k", "order-1", "-n", cluster.ns)
    assert len(copies) == 2 and {c["tags"] for c in copies} == {"TagB"}
    [record] = history.records(detail=True)
    assert (record["command"], record["outcome"], record["plan"], record["result"]) == (
        "queryMsgById", "applied", [plan], [copy])
    cluster.consumer_online("Readers", ("Orders",), client_id="127.0.0.1@direct")
    direct = invoke("queryMsgById", "-i", first["msgId"], "-t", "Orders", "-g", "Readers",
                    "-d", "127.0.0.1@direct", "-n", cluster.ns, "-o", "json")
    assert direct.exit_code == 0, direct.stderr
    [row] = rows_of(direct)
    assert (row["clientId"], row["consumeResult"]) == ("127.0.0.1@direct", "CR_SUCCESS")
    assert [r["command"] for r in history.records()] == ["queryMsgById", "queryMsgById"]


def test_query_msg_by_key(cluster: BackgroundCluster) -> None:
    orders(cluster)
    rows = json_rows("queryMsgByKey", "-t", "Orders", "-k", "shared", "-n", cluster.ns)
    assert [(r["queueId"], r["queueOffset"], r["keys"]) for r in rows] == [
        (1, 0, "order-3 shared")]
    assert json_rows("queryMsgByKey", "-t", "Orders", "-k", "none", "-n", cluster.ns) == []
    future = json_rows("queryMsgByKey", "-t", "Orders", "-k", "order-0", "-b",
                       "2999-01-01T00:00:00", "-n", cluster.ns)
    assert future == []
    unknown = invoke("queryMsgByKey", "-t", "NoSuchTopic", "-k", "k", "-n", cluster.ns)
    assert unknown.exit_code == ExitCode.NOT_FOUND


def test_query_msg_by_offset(cluster: BackgroundCluster) -> None:
    orders(cluster)
    [row] = json_rows("queryMsgByOffset", "-t", "Orders", "-b", "broker-a", "-i", "0",
                      "-o", "2", "-n", cluster.ns)
    assert (row["queueOffset"], row["body"], row["keys"]) == (2, "order 2", "order-2")
    beyond = invoke("queryMsgByOffset", "-t", "Orders", "-b", "broker-a", "-i", "0", "-o",
                    "9", "-n", cluster.ns)
    assert beyond.exit_code == ExitCode.NOT_FOUND
    no_broker = invoke("queryMsgByOffset", "-t", "Orders", "-b", "broker-z", "-i", "0", "-o",
                       "0", "-n", cluster.ns)
    assert no_broker.exit_code == ExitCode.NOT_FOUND and "broker-a" in no_broker.stderr


def test_print_msg(cluster: BackgroundCluster) -> None:
    orders(cluster)
    rows = json_rows("printMsg", "-t", "Orders", "-n", cluster.ns)
    assert [(r["queueId"], r["queueOffset"], r["body"]) for r in rows] == [
        (0, 0, "order 0"), (0, 1, "order 1"), (0, 2, "order 2"), (1, 0, "order 3")]
    tag_a = json_rows("printMsg", "-t", "Orders", "-s", "TagA", "-d", "false", "-n", cluster.ns)
    assert [(r["keys"], r["body"]) for r in tag_a] == [("order-0", None), ("order-2", None)]
    assert len(json_rows("printMsg", "-t", "Orders", "--limit", "2", "-n", cluster.ns)) == 2
    later = json_rows("printMsg", "-t", "Orders", "-b", "2999-01-01#00:00:00:000",
                      "-n", cluster.ns)
    assert later == []


def test_print_msg_by_queue(cluster: BackgroundCluster) -> None:
    orders(cluster)
    counts = json_rows("printMsgByQueue", "-t", "Orders", "-a", "broker-a", "-i", "0", "-f",
                       "true", "-n", cluster.ns)
    assert counts == [{"tag": "TagA", "count": 2}, {"tag": "TagB", "count": 1}]
    rows = json_rows("printMsgByQueue", "-t", "Orders", "-a", "broker-a", "-i", "0", "-d",
                     "true", "-n", cluster.ns)
    assert [r["body"] for r in rows] == ["order 0", "order 1", "order 2"]


def test_consume_message(cluster: BackgroundCluster) -> None:
    orders(cluster)
    assert len(json_rows("consumeMessage", "-t", "Orders", "-c", "3", "-n", cluster.ns)) == 3
    rows = json_rows("consumeMessage", "-t", "Orders", "-b", "broker-a", "-i", "0", "-o", "1",
                     "-n", cluster.ns)
    assert [r["queueOffset"] for r in rows] == [1, 2]
    bad = invoke("consumeMessage", "-t", "Orders", "-o", "1", "-n", cluster.ns)
    assert bad.exit_code == ExitCode.USAGE


def test_check_msg_send_rt(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Timed", queues=2)
    result = invoke("checkMsgSendRT", "-t", "Timed", "-a", "4", "-s", "8", "-n", cluster.ns,
                    "-o", "json")
    assert result.exit_code == 0, result.stderr
    rows = rows_of(result)
    assert [(r["queueId"], r["sendResult"]) for r in rows] == [
        (0, "SEND_OK"), (1, "SEND_OK"), (0, "SEND_OK"), (1, "SEND_OK")]
    assert "Avg RT" in result.stderr


def test_query_cq(cluster: BackgroundCluster) -> None:
    orders(cluster)
    result = invoke("queryCq", "-t", "Orders", "-q", "0", "-i", "1", "-c", "5", "-n",
                    cluster.ns, "-o", "json")
    assert result.exit_code == 0, result.stderr
    rows = rows_of(result)
    assert [r["index"] for r in rows][:2] == [1, 2]
    [offset_row] = json_rows("queryMsgByOffset", "-t", "Orders", "-b", "broker-a", "-i", "0",
                             "-o", "1", "-n", cluster.ns)
    assert rows[0]["physicOffset"] == offset_row["commitLogOffset"]
    assert "max index 3" in result.stderr

"""Consumer and producer reads through CliRunner against a live cluster, ``-o json`` parsed."""

from __future__ import annotations

import time

from engine.remoting.client import RemotingClient
from mqadmin.exit_codes import ExitCode
from tests.broker.pop_calls import ack, pop

from .cli import invoke, json_rows
from .conftest import BackgroundCluster


def lagging_group(cluster: BackgroundCluster) -> None:
    """Group Prog-G online on topic Prog: queue 0 holds 3 messages and the group committed
    1, queue 1 holds 1 message, all consumed."""
    cluster.create_topic("Prog", queues=2)
    cluster.create_group("Prog-G")
    for n in range(3):
        cluster.send("Prog", f"m{n}".encode(), queue_id=0, keys=f"k{n}")
    cluster.send("Prog", queue_id=1)
    cluster.commit("Prog-G", "Prog", 0, 1)
    cluster.commit("Prog-G", "Prog", 1, 1)
    cluster.consumer_online("Prog-G", ("Prog",))


def test_consumer_progress_lag_in_messages_and_time(cluster: BackgroundCluster) -> None:
    lagging_group(cluster)
    before = int(time.time() * 1000)
    result = invoke("consumerProgress", "-g", "Prog-G", "-t", "Prog", "-n", cluster.ns,
                    "-o", "json")
    assert result.exit_code == 0, result.stderr
    q0, q1, total = json_rows("consumerProgress", "-g", "Prog-G", "-t", "Prog", "-n",
                              cluster.ns)
    assert (q0["queueId"], q0["brokerOffset"], q0["consumerOffset"], q0["diff"]) == (0, 3, 1, 2)
    assert (q1["queueId"], q1["diff"], q1["lagMs"], q1["oldestUnconsumed"]) == (1, 0, 0, None)
    [second] = json_rows("queryMsgByOffset", "-t", "Prog", "-b", "broker-a", "-i", "0",
                         "-o", "1", "-n", cluster.ns)
    assert q0["oldestUnconsumed"] == second["storeTime"]  # the message at offset 1
    assert 0 <= q0["lagMs"] <= int(time.time() * 1000) - before + 60_000
    assert (q0["clientIP"], q1["clientIP"]) == ("127.0.0.1", "NA")
    assert q0["lastTime"]  # the store time of the last consumed message
    assert total["topic"] == "(total)" and total["queueId"] is None
    assert (total["brokerOffset"], total["consumerOffset"], total["diff"]) == (4, 2, 2)
    assert total["lagMs"] == q0["lagMs"] and total["oldestUnconsumed"] == q0["oldestUnconsumed"]
    assert "Consume TPS" in result.stderr


def test_consumer_progress_of_every_group(cluster: BackgroundCluster) -> None:
    lagging_group(cluster)
    rows = json_rows("consumerProgress", "-n", cluster.ns)
    [row] = [r for r in rows if r["group"] == "Prog-G"]
    assert (row["count"], row["type"], row["model"], row["diffTotal"]) == (
        1, "PUSH", "CLUSTERING", 2)
    assert row["version"].startswith("V")
    by_group = json_rows("consumerProgress", "-g", "Prog-G", "-n", cluster.ns)
    assert by_group[-1]["diff"] == 2  # every topic of the group, through its retry topic


def test_consumer_progress_of_a_group_never_online_exits_3(cluster: BackgroundCluster) -> None:
    result = invoke("consumerProgress", "-g", "NeverOnline", "-n", cluster.ns)
    assert result.exit_code == ExitCode.NOT_FOUND
    assert "group 'NeverOnline' does not exist on any broker" in result.stderr


def test_consumer_connection(cluster: BackgroundCluster) -> None:
    lagging_group(cluster)
    [row] = json_rows("consumerConnection", "-g", "Prog-G", "-n", cluster.ns)
    assert row["clientId"] == "127.0.0.1@test" and row["consumeType"] == "CONSUME_PASSIVELY"
    assert row["messageModel"] == "CLUSTERING" and "Prog:*" in row["subscriptions"]
    cluster.create_topic("%RETRY%Offline", queues=1)
    offline = invoke("consumerConnection", "-g", "Offline", "-n", cluster.ns)
    assert offline.exit_code == ExitCode.NOT_FOUND and "start one" in offline.stderr


def test_consumer_status(cluster: BackgroundCluster) -> None:
    lagging_group(cluster)
    [row] = json_rows("consumerStatus", "-g", "Prog-G", "-n", cluster.ns)
    assert (row["clientId"], row["queues"], row["consumeOkTPS"], row["error"]) == (
        "127.0.0.1@test", 1, 2.5, None)
    result = invoke("consumerStatus", "-g", "Prog-G", "-i", "127.0.0.1@test", "-s",
                    "-n", cluster.ns, "-o", "json")
    assert result.exit_code == 0, result.stderr
    [queue] = json_rows("consumerStatus", "-g", "Prog-G", "-i", "127.0.0.1@test",
                        "-n", cluster.ns)
    assert (queue["topic"], queue["queueId"], queue["cachedMsgCount"]) == ("Prog", 0, 1)
    assert "main thread" in result.stderr and "clientId: 127.0.0.1@test" in result.stderr


def test_producer_connection(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Produced", queues=1)
    cluster.producer_online("PG-1")
    [row] = json_rows("producerConnection", "-g", "PG-1", "-t", "Produced", "-n", cluster.ns)
    assert row["clientId"] == "127.0.0.1@producer" and row["clientAddr"].startswith("127.0.0.1")
    unknown = invoke("producerConnection", "-g", "PG-none", "-t", "Produced", "-n", cluster.ns)
    assert unknown.exit_code == ExitCode.NOT_FOUND


def test_allocate_mq(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Spread", queues=4)
    rows = json_rows("allocateMQ", "-t", "Spread", "-i", "c,a,b", "-n", cluster.ns)
    assert [(r["clientId"], r["queueId"]) for r in rows] == [
        ("a", 0), ("a", 1), ("b", 2), ("c", 3)]
    assert invoke("allocateMQ", "-t", "Nope", "-i", "a", "-n", cluster.ns).exit_code == (
        ExitCode.NOT_FOUND)


def test_consumer_progress_of_a_pop_group_shows_what_is_in_flight(
        cluster: BackgroundCluster) -> None:
    """A POP group on our broker: 5 messages, 3 popped, 1 of them acked: diff 4 (2 ready, 2 in
    flight), as 5.3 counts a POP group's lag."""
    cluster.create_topic("PopProg", queues=1)
    for n in range(5):
        cluster.send("PopProg", f"p{n}".encode())

    async def pop_three() -> None:
        client = RemotingClient()
        try:
            got = await pop(client, cluster.broker_addr, "PopProg-G", "PopProg", max_nums=3,
                            init_mode=0)
            assert len(got.messages) == 3
            await ack(client, cluster.broker_addr, got.messages[0])
        finally:
            await client.close()

    cluster.call(pop_three())
    q0, _total = json_rows("consumerProgress", "-g", "PopProg-G", "-t", "PopProg", "-n",
                           cluster.ns)
    assert (q0["brokerOffset"], q0["consumerOffset"], q0["diff"], q0["inflight"]) == (5, 1, 4, 2)

"""Topic commands through CliRunner against a live cluster, ``-o json`` parsed."""

from __future__ import annotations

from engine.client.admin.cluster import MQAdmin
from engine.protocol.body.topic import TopicConfig
from mqadmin import history
from mqadmin.exit_codes import ExitCode

from .cli import invoke, json_rows, rows_of
from .conftest import BackgroundCluster


def broker_topic(cluster: BackgroundCluster, topic: str) -> TopicConfig | None:
    async def get(admin: MQAdmin) -> TopicConfig | None:
        table = await admin.broker.all_topic_config(cluster.broker_addr)
        return table.topic_config_table.get(topic)
    result: TopicConfig | None = cluster.admin_call(get)
    return result


def test_topic_list(cluster: BackgroundCluster) -> None:
    cluster.create_topic("OrdersTopic")
    topics = [r["topic"] for r in json_rows("topicList", "-n", cluster.ns)]
    assert {"TBW102", "OrdersTopic"} <= set(topics)
    assert topics == sorted(topics)


def test_topic_list_cluster_model_shows_consuming_groups(cluster: BackgroundCluster) -> None:
    cluster.create_topic("OrdersTopic")
    cluster.create_topic("%RETRY%SomeGroup", queues=1)
    cluster.commit("OrdersGroup", "OrdersTopic", 0, 0)
    rows = json_rows("topicList", "-c", "-n", cluster.ns)
    assert {"cluster": "DefaultCluster", "topic": "OrdersTopic", "group": "OrdersGroup"} in rows
    assert {"cluster": "DefaultCluster", "topic": "TBW102", "group": None} in rows
    assert "%RETRY%SomeGroup" not in {r["topic"] for r in rows}
    assert "%RETRY%SomeGroup" in {r["topic"] for r in json_rows("topicList", "-n", cluster.ns)}


def test_topic_route(cluster: BackgroundCluster) -> None:
    cluster.create_topic("RoutedTopic", queues=2)
    rows = json_rows("topicRoute", "-t", "RoutedTopic", "-n", cluster.ns)
    assert rows == [{"topic": "RoutedTopic", "cluster": "DefaultCluster",
                     "brokerName": "broker-a", "brokerId": 0, "addr": cluster.broker_addr,
                     "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "topicSysFlag": 0,
                     "messageType": None}]


def test_topic_route_shows_the_message_type(cluster: BackgroundCluster) -> None:
    made = invoke("updateTopic", "-n", cluster.ns, "-c", "DefaultCluster", "-t", "FifoRoute",
                  "-a", "+message.type=FIFO", "--yes")
    assert made.exit_code == 0, made.stderr
    [row] = json_rows("topicRoute", "-t", "FifoRoute", "-n", cluster.ns)
    assert row["messageType"] == "FIFO"


def test_update_topic_on_a_cluster(cluster: BackgroundCluster) -> None:
    result = invoke("updateTopic", "-n", cluster.ns, "-c", "DefaultCluster", "-t", "Orders",
                    "-r", "8", "-w", "8", "--yes", "--output", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert row["broker"] == cluster.broker_addr and row["verified"] is True
    assert (row["before"], row["after"]) == ("(absent)", "r=8 w=8 perm=RW- sysFlag=0")
    assert "updateTopic plan:" in result.stderr
    config = broker_topic(cluster, "Orders")
    assert config is not None and (config.read_queue_nums, config.write_queue_nums) == (8, 8)
    [route] = json_rows("topicRoute", "-t", "Orders", "-n", cluster.ns)
    assert route["writeQueueNums"] == 8
    [record] = history.records(detail=True)
    assert (record["command"], record["target"], record["outcome"]) == (
        "updateTopic", "Orders", "applied")
    assert record["args"]["topic"] == "Orders" and record["result"][0]["verified"] is True


def test_update_topic_on_a_broker_with_order_conf(cluster: BackgroundCluster) -> None:
    result = invoke("updateTopic", "-n", cluster.ns, "-b", cluster.broker_addr, "-t", "Seq",
                    "-r", "2", "-w", "2", "-o", "true", "--yes", "--output", "json")
    assert result.exit_code == 0, result.stderr
    rows = rows_of(result)
    assert [r["server"] for r in rows] == [cluster.broker_addr, cluster.ns]
    assert all(r["verified"] for r in rows)
    [conf] = json_rows("updateOrderConf", "-t", "Seq", "-m", "get", "-n", cluster.ns)
    assert conf["orderConf"] == "broker-a:2"


def test_update_topic_dry_run_changes_nothing(cluster: BackgroundCluster) -> None:
    result = invoke("updateTopic", "-n", cluster.ns, "-c", "DefaultCluster", "-t", "Dry",
                    "--dry-run", "--output", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert row == {"broker": cluster.broker_addr, "target": "Dry", "before": "(absent)",
                   "after": "r=8 w=8 perm=RW- sysFlag=0"}
    assert "dry run" in result.stderr
    assert broker_topic(cluster, "Dry") is None
    assert history.records() == []


def test_update_topic_refusals(cluster: BackgroundCluster) -> None:
    bad_name = invoke("updateTopic", "-n", cluster.ns, "-c", "DefaultCluster", "-t", "a b")
    assert bad_name.exit_code == ExitCode.USAGE and "invalid topic name" in bad_name.stderr
    both = invoke("updateTopic", "-n", cluster.ns, "-t", "T", "-c", "C", "-b", "h:1")
    assert both.exit_code == ExitCode.USAGE and "either -b" in both.stderr
    unknown = invoke("updateTopic", "-n", cluster.ns, "-c", "NoCluster", "-t", "T", "--yes")
    assert unknown.exit_code == ExitCode.NOT_FOUND
    assert "DefaultCluster" in unknown.stderr and "clusterList" in unknown.stderr
    no_yes = invoke("updateTopic", "-n", cluster.ns, "-c", "DefaultCluster", "-t", "T")
    assert no_yes.exit_code == ExitCode.USAGE and "--yes" in no_yes.stderr
    assert broker_topic(cluster, "T") is None


def test_system_topic_update_is_rejected_with_exit_4(cluster: BackgroundCluster) -> None:
    result = invoke("updateTopic", "-n", cluster.ns, "-b", cluster.broker_addr, "-t",
                    "SCHEDULE_TOPIC_XXXX", "--yes")
    assert result.exit_code == ExitCode.REJECTED, result.stderr
    assert "Traceback" not in result.output
    [record] = history.records()
    assert (record["outcome"], record["exitCode"]) == ("failed", ExitCode.REJECTED)


def test_delete_topic(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Doomed")
    result = invoke("deleteTopic", "-n", cluster.ns, "-c", "DefaultCluster", "-t", "Doomed",
                    "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr
    rows = rows_of(result)
    assert [r["server"] for r in rows] == [cluster.broker_addr, cluster.ns]
    assert all(r["verified"] for r in rows)
    assert broker_topic(cluster, "Doomed") is None
    assert invoke("topicRoute", "-t", "Doomed", "-n", cluster.ns).exit_code == (
        ExitCode.NOT_FOUND)
    again = invoke("deleteTopic", "-n", cluster.ns, "-c", "DefaultCluster", "-t", "Doomed",
                   "--yes")
    assert again.exit_code == ExitCode.NOT_FOUND and "topicList" in again.stderr


def test_update_topic_perm(cluster: BackgroundCluster) -> None:
    cluster.create_topic("PermTopic", queues=2)
    result = invoke("updateTopicPerm", "-n", cluster.ns, "-c", "DefaultCluster", "-t",
                    "PermTopic", "-p", "4", "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert row["after"].endswith("perm=R-- sysFlag=0") and row["verified"] is True
    config = broker_topic(cluster, "PermTopic")
    assert config is not None and config.perm == 4 and config.write_queue_nums == 2
    bad = invoke("updateTopicPerm", "-n", cluster.ns, "-c", "DefaultCluster", "-t",
                 "PermTopic", "-p", "5", "--yes")
    assert bad.exit_code == ExitCode.USAGE
    unknown = invoke("updateTopicPerm", "-n", cluster.ns, "-c", "DefaultCluster", "-t",
                     "NoSuchTopic", "-p", "6", "--yes")
    assert unknown.exit_code == ExitCode.NOT_FOUND


def test_topic_status_and_cluster_list(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Stats", queues=2)
    for _ in range(3):
        cluster.send("Stats", queue_id=1)
    rows = json_rows("topicStatus", "-t", "Stats", "-n", cluster.ns)
    assert [(r["queueId"], r["minOffset"], r["maxOffset"]) for r in rows] == [(0, 0, 0),
                                                                             (1, 0, 3)]
    assert rows[1]["lastUpdated"] and rows[0]["brokerName"] == "broker-a"
    assert json_rows("topicClusterList", "-t", "Stats", "-n", cluster.ns) == [
        {"topic": "Stats", "cluster": "DefaultCluster"}]
    assert invoke("topicStatus", "-t", "Nope", "-n", cluster.ns).exit_code == (
        ExitCode.NOT_FOUND)


def test_update_order_conf_put_get_delete(cluster: BackgroundCluster) -> None:
    put = invoke("updateOrderConf", "-t", "Seq", "-m", "put", "-v", "broker-a:4",
                 "-n", cluster.ns, "--yes", "-o", "json")
    assert put.exit_code == 0, put.stderr
    assert rows_of(put)[0]["after"] == "broker-a:4"
    assert json_rows("updateOrderConf", "-t", "Seq", "-m", "get", "-n", cluster.ns)[0][
        "orderConf"] == "broker-a:4"
    missing = invoke("updateOrderConf", "-t", "Seq", "-m", "put", "-n", cluster.ns, "--yes")
    assert missing.exit_code == ExitCode.USAGE
    delete = invoke("updateOrderConf", "-t", "Seq", "-m", "delete", "-n", cluster.ns,
                    "--yes", "-o", "json")
    assert delete.exit_code == 0 and rows_of(delete)[0]["after"] == "(absent)"
    assert json_rows("updateOrderConf", "-t", "Seq", "-m", "get", "-n", cluster.ns)[0][
        "orderConf"] is None

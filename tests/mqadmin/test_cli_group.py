"""Consumer-group mutations through CliRunner against a live cluster, ``-o json`` parsed."""

from __future__ import annotations

from engine.client.admin.cluster import MQAdmin
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.body.topic import TopicConfig
from mqadmin.exit_codes import ExitCode

from .cli import invoke, rows_of
from .conftest import BackgroundCluster


def group_config(cluster: BackgroundCluster, group: str) -> SubscriptionGroupConfig | None:
    async def get(admin: MQAdmin) -> SubscriptionGroupConfig | None:
        table = await admin.broker.all_group_config(cluster.broker_addr)
        return table.subscription_group_table.get(group)
    found: SubscriptionGroupConfig | None = cluster.admin_call(get)
    return found


def topic_config(cluster: BackgroundCluster, topic: str) -> TopicConfig | None:
    async def get(admin: MQAdmin) -> TopicConfig | None:
        table = await admin.broker.all_topic_config(cluster.broker_addr)
        return table.topic_config_table.get(topic)
    found: TopicConfig | None = cluster.admin_call(get)
    return found


def offsets(cluster: BackgroundCluster, group: str, topic: str) -> list[int]:
    async def get(admin: MQAdmin) -> list[int]:
        stats = await admin.broker.consume_stats(cluster.broker_addr, group, topic)
        return [w.consumer_offset for _, w in sorted(stats.offset_table.items())]
    found: list[int] = cluster.admin_call(get)
    return found


def filled(cluster: BackgroundCluster, topic: str, group: str, counts: list[int],
           committed: list[int]) -> None:
    """`topic` with `counts[i]` messages in queue i and `group`'s offsets at `committed`."""
    cluster.create_topic(topic, queues=len(counts))
    cluster.create_group(group)
    for queue_id, count in enumerate(counts):
        for n in range(count):
            cluster.send(topic, f"m{n}".encode(), queue_id=queue_id)
    for queue_id, offset in enumerate(committed):
        cluster.commit(group, topic, queue_id, offset)


def test_update_sub_group(cluster: BackgroundCluster) -> None:
    result = invoke("updateSubGroup", "-c", "DefaultCluster", "-g", "G1", "-r", "3", "-s",
                    "false", "-d", "true", "-n", cluster.ns, "--yes", "--output", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert row["before"] == "(absent)" and row["verified"] is True
    config = group_config(cluster, "G1")
    assert config == SubscriptionGroupConfig("G1", consume_enable=False,
                                             consume_from_min_enable=False,
                                             consume_broadcast_enable=True, retry_max_times=3)


def test_update_sub_group_resizes_its_retry_topic(cluster: BackgroundCluster) -> None:
    cluster.create_topic("%RETRY%G2", queues=1)
    result = invoke("updateSubGroup", "-b", cluster.broker_addr, "-g", "G2", "-q", "2",
                    "-n", cluster.ns, "--yes", "--output", "json")
    assert result.exit_code == 0, result.stderr
    assert "resized" in rows_of(result)[0]["result"]
    retry = topic_config(cluster, "%RETRY%G2")
    assert retry is not None and retry.write_queue_nums == 2


def test_delete_sub_group(cluster: BackgroundCluster) -> None:
    cluster.create_group("G3")
    result = invoke("deleteSubGroup", "-b", cluster.broker_addr, "-g", "G3", "-n", cluster.ns,
                    "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert rows_of(result)[0]["verified"] is True
    assert group_config(cluster, "G3") is None
    again = invoke("deleteSubGroup", "-b", cluster.broker_addr, "-g", "G3", "-n", cluster.ns,
                   "--yes")
    assert again.exit_code == ExitCode.NOT_FOUND


def test_delete_sub_group_on_a_cluster_drops_retry_and_dlq_topics(
        cluster: BackgroundCluster) -> None:
    cluster.create_group("G4")
    cluster.create_topic("%RETRY%G4", queues=1)
    cluster.create_topic("%DLQ%G4", queues=1)
    result = invoke("deleteSubGroup", "-c", "DefaultCluster", "-g", "G4", "-r", "true",
                    "-n", cluster.ns, "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert [r["server"] for r in rows_of(result)] == [cluster.broker_addr, cluster.ns]
    assert all(r["verified"] for r in rows_of(result))
    assert topic_config(cluster, "%RETRY%G4") is None and topic_config(cluster, "%DLQ%G4") is None
    assert invoke("topicRoute", "-t", "%DLQ%G4", "-n", cluster.ns).exit_code == (
        ExitCode.NOT_FOUND)


def test_reset_offset_with_no_consumer_online(cluster: BackgroundCluster) -> None:
    filled(cluster, "Replay", "R1", [3, 2], [3, 2])
    result = invoke("resetOffsetByTime", "-g", "R1", "-t", "Replay", "-s", "0", "-n",
                    cluster.ns, "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert (row["before"], row["after"], row["verified"]) == ("q0=3 q1=2", "q0=0 q1=0", True)
    assert "no consumer online" in row["result"]
    assert offsets(cluster, "R1", "Replay") == [0, 0]
    assert "q0=3 q1=2" in result.stderr  # the plan came first


def test_reset_offset_through_the_broker_to_online_consumers(
        cluster: BackgroundCluster) -> None:
    filled(cluster, "Replay", "R2", [4], [4])
    cluster.consumer_online("R2", ("Replay",))
    result = invoke("resetOffsetByTime", "-g", "R2", "-t", "Replay", "-s",
                    "1970-01-01T00:00:00+00:00", "-n", cluster.ns, "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert "consumers told" in row["result"] and row["after"] == "q0=0"
    assert offsets(cluster, "R2", "Replay") == [0]


def test_reset_offset_without_force_only_moves_back(cluster: BackgroundCluster) -> None:
    filled(cluster, "Replay", "R3", [3], [1])
    result = invoke("resetOffsetByTime", "-g", "R3", "-t", "Replay", "-s", "now", "-f",
                    "false", "-n", cluster.ns, "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert rows_of(result)[0]["after"] == "q0=1"  # "now" is the end: forward, not forced
    assert offsets(cluster, "R3", "Replay") == [1]


def test_skip_accumulated_message(cluster: BackgroundCluster) -> None:
    filled(cluster, "Backlog", "S1", [5, 2], [1, 0])
    result = invoke("skipAccumulatedMessage", "-g", "S1", "-t", "Backlog", "-n", cluster.ns,
                    "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert (row["after"], row["verified"]) == ("q0=5 q1=2", True)
    assert offsets(cluster, "S1", "Backlog") == [5, 2]


def test_clone_group_offset(cluster: BackgroundCluster) -> None:
    filled(cluster, "Shared", "Src", [3, 3], [2, 1])
    result = invoke("cloneGroupOffset", "-s", "Src", "-d", "Dest", "-t", "Shared", "-o",
                    "true", "-n", cluster.ns, "--yes", "--output", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert (row["before"], row["after"], row["verified"]) == ("q0=0 q1=0", "q0=2 q1=1", True)
    assert offsets(cluster, "Dest", "Shared") == [2, 1]


def test_reset_offset_of_an_unknown_topic_exits_3(cluster: BackgroundCluster) -> None:
    result = invoke("resetOffsetByTime", "-g", "G", "-t", "NoSuchTopic", "-s", "0", "-n",
                    cluster.ns, "--yes")
    assert result.exit_code == ExitCode.NOT_FOUND and "topicList" in result.stderr
    bad_time = invoke("resetOffsetByTime", "-g", "G", "-t", "T", "-s", "yesterday", "-n",
                      cluster.ns, "--yes")
    assert bad_time.exit_code == ExitCode.USAGE and "ISO 8601" in bad_time.stderr

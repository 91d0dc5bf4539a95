"""Topic attributes and consumeMessageOrderly through the CLI against a live cluster:
updateTopic -a, topicConfig, topicList --attributes, updateSubGroup -o."""

from __future__ import annotations

from typer.testing import Result

from engine.client.admin import MQAdmin
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.body.topic import TopicConfig
from mqadmin.exit_codes import ExitCode

from .cli import invoke, json_rows, rows_of
from .conftest import BackgroundCluster


def broker_topic(cluster: BackgroundCluster, topic: str) -> TopicConfig | None:
    async def get(admin: MQAdmin) -> TopicConfig | None:
        return (await admin.broker.all_topic_config(cluster.broker_addr)
                ).topic_config_table.get(topic)
    found: TopicConfig | None = cluster.admin_call(get)
    return found


def update_topic(cluster: BackgroundCluster, topic: str, *args: str) -> Result:
    return invoke("updateTopic", "-n", cluster.ns, "-c", "DefaultCluster", "-t", topic,
                  *args, "--yes", "--output", "json")


def test_update_topic_with_message_type_then_change_it(cluster: BackgroundCluster) -> None:
    result = update_topic(cluster, "Fifo", "-a", "+message.type=FIFO")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert (row["before"], row["after"], row["verified"]) == (
        "(absent)", "r=8 w=8 perm=RW- sysFlag=0 attrs=message.type=FIFO", True)
    config = broker_topic(cluster, "Fifo")
    assert config is not None and config.message_type == "FIFO"

    result = update_topic(cluster, "Fifo", "-w", "4", "-r", "4")  # no -a: kept
    assert result.exit_code == 0, result.stderr
    assert rows_of(result)[0]["after"] == "r=4 w=4 perm=RW- sysFlag=0 attrs=message.type=FIFO"

    result = update_topic(cluster, "Fifo", "-a", "+message.type=DELAY")
    assert result.exit_code == 0, result.stderr
    config = broker_topic(cluster, "Fifo")
    assert config is not None and config.attributes == {"message.type": "DELAY"}

    [shown] = json_rows("topicConfig", "-t", "Fifo", "-n", cluster.ns)
    assert shown == {"topic": "Fifo", "brokerName": "broker-a", "addr": cluster.broker_addr,
                     "readQueueNums": 8, "writeQueueNums": 8, "perm": "RW-",
                     "topicSysFlag": 0, "messageType": "DELAY",
                     "attributes": "message.type=DELAY"}


def test_refusals_name_the_rule(cluster: BackgroundCluster) -> None:
    assert update_topic(cluster, "Q", "-a", "+queue.type=SimpleCQ").exit_code == 0
    result = update_topic(cluster, "Q", "-a", "+queue.type=SimpleCQ")  # only at creation
    assert result.exit_code == ExitCode.REJECTED
    assert "attempt to update an unchangeable attribute. key: queue.type" in result.stderr
    assert "message.type" in result.stderr  # the hint names what can change

    result = update_topic(cluster, "Q", "-a", "+message.type=fifo")
    assert result.exit_code == ExitCode.REJECTED
    assert "value is not in set: [UNSPECIFIED, MIXED" in result.stderr

    result = update_topic(cluster, "Q", "-a", "+message.type=MIXED")
    assert result.exit_code == ExitCode.REJECTED
    assert "MIXED message type is not supported." in result.stderr

    result = update_topic(cluster, "Q", "-a", "message.type=FIFO")  # refused before any call
    assert result.exit_code == ExitCode.USAGE
    assert "add/alter attribute format is wrong: message.type" in result.stderr
    config = broker_topic(cluster, "Q")
    assert config is not None and config.attributes == {"queue.type": "SimpleCQ"}


def test_topic_list_with_attributes(cluster: BackgroundCluster) -> None:
    assert update_topic(cluster, "Tx", "-a", "+message.type=TRANSACTION").exit_code == 0
    cluster.create_topic("Plain")
    rows = {r["topic"]: r for r in json_rows("topicList", "--attributes", "-n", cluster.ns)}
    assert rows["Tx"] == {"topic": "Tx", "messageType": "TRANSACTION",
                          "attributes": "message.type=TRANSACTION"}
    assert rows["Plain"] == {"topic": "Plain", "messageType": None, "attributes": None}
    clustered = json_rows("topicList", "-c", "--attributes", "-n", cluster.ns)
    assert {"cluster": "DefaultCluster", "topic": "Tx", "group": None,
            "messageType": "TRANSACTION", "attributes": "message.type=TRANSACTION"} in clustered


def test_update_sub_group_consume_message_orderly(cluster: BackgroundCluster) -> None:
    result = invoke("updateSubGroup", "-c", "DefaultCluster", "-g", "Fifo", "-o", "true",
                    "-n", cluster.ns, "--yes", "--output", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert row["verified"] is True and " consumeMessageOrderly=true " in row["after"]
    found = cluster.admin_call(lambda admin: admin.broker.all_group_config(cluster.broker_addr))
    config = found.subscription_group_table["Fifo"]
    assert config == SubscriptionGroupConfig("Fifo", consume_from_min_enable=False,
                                             consume_broadcast_enable=False,
                                             consume_message_orderly=True)

    result = invoke("updateSubGroup", "-c", "DefaultCluster", "-g", "Fifo", "-o", "json",
                    "-n", cluster.ns, "--yes")
    assert result.exit_code == ExitCode.USAGE
    assert "--output json" in result.stderr

    result = invoke("updateSubGroup", "-c", "DefaultCluster", "-g", "Fifo", "--attributes",
                    "+colour=red", "-n", cluster.ns, "--yes")
    assert result.exit_code == ExitCode.REJECTED
    assert "unsupported key: colour" in result.stderr


def test_update_topic_perm_keeps_the_attributes(cluster: BackgroundCluster) -> None:
    assert update_topic(cluster, "Kept", "-a", "+message.type=FIFO").exit_code == 0
    result = invoke("updateTopicPerm", "-n", cluster.ns, "-c", "DefaultCluster", "-t", "Kept",
                    "-p", "4", "--yes", "-o", "json")
    assert result.exit_code == 0, result.stderr
    config = broker_topic(cluster, "Kept")
    assert config is not None and (config.perm, config.message_type) == (4, "FIFO")

"""Broker settings, runtime info and statistics, through the protocol."""

from __future__ import annotations

from pathlib import Path

from engine.broker.controller import BrokerController
from engine.broker.handlers.admin_broker import human_bytes, merge_properties, run_time
from engine.common import properties
from engine.protocol import fastjson
from engine.protocol.body.admin import (
    BrokerStatsData,
    ConsumeStatsList,
    OffsetWrapper,
)
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.route import KVTable
from engine.protocol.body.topic import DataVersion
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.wire import from_json
from engine.remoting.client import RemotingClient

from .conftest import call
from .test_admin_topic import create_topic, parsed, put_messages

# request-codes.md §3.10
RUNTIME_KEYS = (
    "brokerVersionDesc", "brokerVersion", "msgPutTotalYesterdayMorning",
    "msgPutTotalTodayMorning", "msgPutTotalTodayNow", "msgGetTotalYesterdayMorning",
    "msgGetTotalTodayMorning", "msgGetTotalTodayNow", "sendThreadPoolQueueSize",
    "sendThreadPoolQueueCapacity", "pullThreadPoolQueueSize", "pullThreadPoolQueueCapacity",
    "queryThreadPoolQueueSize", "queryThreadPoolQueueCapacity", "EndTransactionQueueSize",
    "EndTransactionThreadPoolQueueCapacity", "dispatchBehindBytes", "pageCacheLockTimeMills",
    "sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueHeadWaitTimeMills",
    "queryThreadPoolQueueHeadWaitTimeMills", "earliestMessageTimeStamp",
    "startAcceptSendRequestTimeStamp", "remainTransientStoreBufferNumbs",
    "remainHowManyDataToFlush", "commitLogDirCapacity", "bootTimestamp", "runtime", "putTps",
    "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps", "putLatency99",
    "putLatency999", "putMessageAverageSize", "putMessageDistributeTime",
    "putMessageEntireTimeMax", "putMessageFailedTimes", "putMessageSizeTotal",
    "putMessageTimesTotal", "getMessageEntireTimeMax", "dispatchMaxBuffer", "commitLogDiskRatio",
    "consumeQueueDiskRatio", "commitLogMinOffset", "commitLogMaxOffset"
)


async def broker_config(client: RemotingClient, addr: str) -> tuple[dict[str, str], DataVersion]:
    resp = await call(client, addr, RequestCode.GET_BROKER_CONFIG)
    assert resp.code == ResponseCode.SUCCESS
    version = from_json(DataVersion, fastjson.loads((resp.ext_fields or {})["version"]))
    return properties.loads((resp.body or b"").decode()), version


async def update(client: RemotingClient, addr: str, text: str) -> tuple[int, str | None]:
    resp = await call(client, addr, RequestCode.UPDATE_BROKER_CONFIG, body=text.encode())
    return resp.code, resp.remark


# ---------------------------------------------------------------------------- settings


async def test_get_broker_config_lists_broker_and_store_keys(broker: BrokerController,
                                                            client: RemotingClient) -> None:
    config, version = await broker_config(client, broker.addr)
    assert config["brokerName"] == "broker-a"
    assert config["brokerClusterName"] == "DefaultCluster"
    assert config["listenPort"] == str(broker.port)
    assert config["autoCreateTopicEnable"] == "true"
    assert config["flushDiskType"] == "ASYNC_FLUSH"
    assert config["storePathRootDir"] == broker.state.store_config.store_path_root_dir
    assert "haListenPort" not in config  # unset optionals are left out
    assert version.counter == 0 and version.timestamp == broker.state.boot_timestamp


async def test_update_broker_config_applies_live_and_persists(
        broker: BrokerController, client: RemotingClient, tmp_path: Path) -> None:
    st = broker.state
    conf = tmp_path / "broker.conf"
    conf.write_text("# my broker\nbrokerName = broker-a\nfileReservedTime=48\n"
                    "brokerPermission=6\n")
    st.config_file = str(conf)
    topics_version = st.topics.data_version.counter

    code, remark = await update(client, broker.addr,
                                "brokerPermission=4\nfileReservedTime=1\nnoSuchKey=1\n")
    assert code == ResponseCode.SUCCESS
    assert remark == "unknown keys ignored: noSuchKey"
    assert st.config.broker_permission == 4 and not st.writable
    assert st.store_config.file_reserved_time == 1
    assert st.topics.data_version.counter == topics_version + 1  # re-registration forced
    config, version = await broker_config(client, broker.addr)
    assert (config["brokerPermission"], config["fileReservedTime"]) == ("4", "1")
    assert version.counter == 1
    assert conf.read_text() == ("# my broker\nbrokerName = broker-a\nfileReservedTime=1\n"
                                "brokerPermission=4\n")

    code, _ = await update(client, broker.addr, "autoCreateSubscriptionGroup=false\n")
    assert code == ResponseCode.SUCCESS
    assert st.groups.auto_create is False
    assert conf.read_text().endswith("autoCreateSubscriptionGroup=false\n")


async def test_update_broker_config_refusals_change_nothing(broker: BrokerController,
                                                           client: RemotingClient) -> None:
    st = broker.state
    code, remark = await update(client, broker.addr, "brokerName=other\nlistenPort=1\n")
    assert code == ResponseCode.NO_PERMISSION
    assert remark is not None and "brokerName, listenPort" in remark
    assert "restart" in remark
    code, remark = await update(client, broker.addr, "flushDiskType=SOMETIMES\n")
    assert code == ResponseCode.SYSTEM_ERROR and "flushDiskType" in (remark or "")
    code, remark = await update(client, broker.addr,
                                "brokerPermission=2\nfileReservedTime=soon\n")
    assert code == ResponseCode.SYSTEM_ERROR
    assert remark is not None and "fileReservedTime" in remark and "'soon'" in remark
    code, remark = await update(client, broker.addr, "fileReservedTime=1\nslaveReadEnable=yes\n")
    assert code == ResponseCode.SYSTEM_ERROR and "slaveReadEnable" in (remark or "")
    assert st.config.broker_name == "broker-a" and st.config.broker_permission == 6
    assert st.store_config.file_reserved_time == 72
    assert st.config.slave_read_enable is False
    _, version = await broker_config(client, broker.addr)
    assert version.counter == 0


def test_merge_properties_keeps_other_lines() -> None:
    text = "# c\nA=1\nB = long \\\n   value\n! other\nA=2\n"
    assert merge_properties(text, {"B": "x", "A": "3", "C": "a b"}) == (
        "# c\nA=3\nB=x\n! other\nC=a b\n")
    assert merge_properties("", {"k": "v"}) == "k=v\n"


def test_java_like_formats() -> None:
    assert human_bytes(1023) == "1023 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(5 * 1024 ** 3) == "5.0 GiB"
    assert run_time(((2 * 24 + 3) * 60 + 4) * 60_000 + 5_999) == (
        "[ 2 days, 3 hours, 4 minutes, 5 seconds ]")


# ---------------------------------------------------------------------------- runtime info


async def test_runtime_info_has_every_key_as_text(broker: BrokerController,
                                                  client: RemotingClient) -> None:
    st = broker.state
    st.store.cleanup.disk_usage = lambda path: 0.25
    await put_messages(broker, "T", 0, 3)
    st.stats.on_put("T", 3, 300)
    resp = await call(client, broker.addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    table = from_json(KVTable, parsed(resp)).table
    assert set(RUNTIME_KEYS) <= set(table)
    assert all(isinstance(v, str) for v in table.values())
    assert (table["brokerVersionDesc"], table["brokerVersion"]) == ("V4_9_7", "407")
    for key in ("putTps", "getTransferedTps", "getFoundTps", "getTotalTps"):
        assert len([float(x) for x in table[key].split(" ")]) == 3
    assert float(table["commitLogDiskRatio"]) == 0.25
    assert table[f"commitLogDiskRatio_{st.store_config.commit_log_dir}"] == "0.25"
    assert table["consumeQueueDiskRatio"] == "0.25"
    assert table["commitLogMinOffset"] == "0"
    assert table["commitLogMaxOffset"] == str(st.store.get_max_phy_offset())
    assert int(table["commitLogMaxOffset"]) > 0
    assert table["msgPutTotalTodayNow"] == "3"
    assert (table["putMessageTimesTotal"], table["putMessageSizeTotal"]) == ("3", "300")
    assert table["putMessageAverageSize"] == "100.0"
    assert table["bootTimestamp"] == str(st.boot_timestamp)
    assert table["runtime"].startswith("[ 0 days, 0 hours, 0 minutes, ")
    assert table["commitLogDirCapacity"].startswith("Total : ")
    assert table["remainTransientStoreBufferNumbs"] == "2147483647"
    assert int(table["earliestMessageTimeStamp"]) > 0


async def test_runtime_info_reports_delay_levels(broker: BrokerController,
                                                 client: RemotingClient) -> None:
    broker.state.schedule.offsets[3] = 5
    resp = await call(client, broker.addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    table = from_json(KVTable, parsed(resp)).table
    assert table["scheduleMessageOffset_3"] == "5,0"
    assert table["putMessageTimesTotal"] == "1"  # Java's figure before the first put


# ---------------------------------------------------------------------------- statistics


async def test_view_broker_stats_data(broker: BrokerController, client: RemotingClient) -> None:
    st = broker.state
    st.stats.on_put("TopicTest", 4, 400)
    st.stats.on_get("CG", "TopicTest", 2, 200)
    st.stats.on_get("CG", "TopicTest", 2, 200)
    resp = await call(client, broker.addr, RequestCode.VIEW_BROKER_STATS_DATA,
                      {"statsName": "TOPIC_PUT_NUMS", "statsKey": "TopicTest"})
    data = from_json(BrokerStatsData, parsed(resp))
    assert (data.stats_minute.sum, data.stats_hour.sum, data.stats_day.sum) == (4, 4, 4)
    assert data.stats_minute.avgpt == 4.0
    assert (resp.body or b"").startswith(b'{"statsDay":{"avgpt":4.0,"sum":4,"tps":')

    resp = await call(client, broker.addr, RequestCode.VIEW_BROKER_STATS_DATA,
                      {"statsName": "GROUP_GET_NUMS", "statsKey": "TopicTest@CG"})
    data = from_json(BrokerStatsData, parsed(resp))
    assert (data.stats_minute.sum, data.stats_minute.avgpt) == (4, 2.0)

    resp = await call(client, broker.addr, RequestCode.VIEW_BROKER_STATS_DATA,
                      {"statsName": "BROKER_PUT_NUMS", "statsKey": "DefaultCluster"})
    assert from_json(BrokerStatsData, parsed(resp)).stats_hour.sum == 4

    resp = await call(client, broker.addr, RequestCode.VIEW_BROKER_STATS_DATA,
                      {"statsName": "TOPIC_PUT_NUMS", "statsKey": "Nope"})
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR,
                                        "The stats <TOPIC_PUT_NUMS> <Nope> not exist")


async def test_broker_consume_stats(broker: BrokerController, client: RemotingClient) -> None:
    st = broker.state
    await create_topic(client, broker.addr, "TopicTest", queues=2)
    results = await put_messages(broker, "TopicTest", 0, 3)
    st.offsets.set_offsets("CG", "TopicTest", {0: 1, 1: 0})
    await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
               body=b'{"groupName":"CG"}')
    resp = await call(client, broker.addr, RequestCode.GET_BROKER_CONSUME_STATS,
                      {"isOrder": "false"})
    stats = from_json(ConsumeStatsList, parsed(resp))
    assert stats.broker_addr == broker.addr
    assert stats.total_diff == 2
    by_group = {g: v for entry in stats.consume_stats_list for g, v in entry.items()}
    assert by_group["TOOLS_CONSUMER"] == []
    [cg] = by_group["CG"]
    assert cg.offset_table[MessageQueue("TopicTest", "broker-a", 0)] == OffsetWrapper(
        3, 1, results[0].store_timestamp)
    assert cg.offset_table[MessageQueue("TopicTest", "broker-a", 1)] == OffsetWrapper(0, 0, 0)

    resp = await call(client, broker.addr, RequestCode.GET_BROKER_CONSUME_STATS,
                      {"isOrder": "true"})
    stats = from_json(ConsumeStatsList, parsed(resp))
    assert stats.total_diff == 0  # admin-created topics are not ordered (4.9.7 ignores order)

"""traceTopicEnable: the broker creates the trace topic as Apache 4.9.7's TopicConfigManager
does (one read and one write queue, read-write, a system topic) and registers it with the
name servers; msgTraceTopicName renames it."""

from __future__ import annotations

from pathlib import Path

from engine.broker.config import BrokerConfig
from engine.common import config as configlib
from engine.namesrv.controller import NamesrvController
from engine.protocol.perm import PERM_READ, PERM_WRITE
from engine.remoting.client import RemotingClient

from .conftest import running_broker
from .test_registration import route


def test_the_keys_are_apache_s() -> None:
    config, unknown = configlib.load(BrokerConfig, {"traceTopicEnable": "true",
                                                    "msgTraceTopicName": "MY_TRACE"})
    assert unknown == []
    assert (config.trace_topic_enable, config.msg_trace_topic_name) == (True, "MY_TRACE")
    assert not BrokerConfig().trace_topic_enable


async def test_trace_topic_is_created_and_registered(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    async with running_broker(tmp_path, namesrv, trace_topic_enable=True) as broker:
        await broker.registration.register_all()
        config = broker.state.topics.get("RMQ_SYS_TRACE_TOPIC")
        assert config is not None
        assert (config.read_queue_nums, config.write_queue_nums) == (1, 1)
        assert config.perm == PERM_READ | PERM_WRITE
        assert broker.state.topics.is_system_topic("RMQ_SYS_TRACE_TOPIC")
        found = await route(client, ns, "RMQ_SYS_TRACE_TOPIC")
        assert found is not None
        [queue] = found["queueDatas"]  # type: ignore[misc]
        assert (queue["readQueueNums"], queue["writeQueueNums"], queue["perm"]) == (1, 1, 6)


async def test_msg_trace_topic_name_renames_it_and_off_means_none(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    async with running_broker(tmp_path / "a", namesrv, trace_topic_enable=True,
                              msg_trace_topic_name="OPS_TRACE") as broker:
        await broker.registration.register_all()
        assert broker.state.topics.is_system_topic("OPS_TRACE")
        assert await route(client, ns, "OPS_TRACE") is not None
        assert broker.state.topics.get("RMQ_SYS_TRACE_TOPIC") is None
    async with running_broker(tmp_path / "b", namesrv, name="broker-b") as broker:
        assert broker.state.topics.get("RMQ_SYS_TRACE_TOPIC") is None

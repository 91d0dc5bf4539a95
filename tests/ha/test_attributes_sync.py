"""A slave copies its master's topic attributes and consumeMessageOrderly with the rest of
the metadata, so a promoted slave tells 5.x clients the same message types."""

from __future__ import annotations

from engine.protocol.body.topic import TopicFilterType
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.header.broker import CreateTopicRequestHeader
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient
from engine.store.config import BrokerRole
from tests.broker.conftest import call
from tests.ha.inproc import MakeBroker, until


async def test_slave_copies_attributes_and_orderly_groups(make_broker: MakeBroker,
                                                          client: RemotingClient) -> None:
    master = await make_broker("m")
    slave = await make_broker("s", broker_id=1, broker_role=BrokerRole.SLAVE)
    header = CreateTopicRequestHeader("Fifo", "TBW102", 2, 2, 6, TopicFilterType.SINGLE_TAG,
                                      False, 0, "+message.type=FIFO")
    resp = await call(client, master.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, to_ext(header))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await call(client, master.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                      body=b'{"groupName":"G","consumeMessageOrderly":true}')
    assert resp.code == ResponseCode.SUCCESS, resp.remark

    def copied() -> bool:
        topic, group = slave.state.topics.get("Fifo"), slave.state.groups.get("G")
        return (topic is not None and topic.message_type == "FIFO"
                and group is not None and group.orderly)

    await until(copied)
    resp = await call(client, slave.addr, RequestCode.GET_TOPIC_CONFIG, {"topic": "Fifo"})
    assert b'"attributes":{"message.type":"FIFO"}' in (resp.body or b"")

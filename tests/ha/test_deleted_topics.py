"""A deleted topic stays deleted across role changes: the slave drops it (config and consume
queues) at its next metadata sync, deleteTopic reaches the slaves, a promotion invents none."""

from __future__ import annotations

from pathlib import Path

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.header.broker import CreateTopicRequestHeader
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient
from engine.store.config import BrokerRole
from tests.broker.conftest import call
from tests.broker.helpers import send_request
from tests.ha.inproc import MakeBroker, until
from tests.ha.traffic import mqadmin, route_of

TOPIC = "OpsTopic"


def has_topic(broker: BrokerController) -> bool:
    """Whether the broker has the topic's config or any of its consume queues."""
    return (broker.state.topics.get(TOPIC) is not None
            or TOPIC in broker.state.store.topic_queues())


async def master_with_topic(make_broker: MakeBroker, client: RemotingClient,
                            slave_sync_interval: int) -> tuple[BrokerController,
                                                               BrokerController]:
    """broker-a's master and slave, both holding OpsTopic (config and queues)."""
    a = await make_broker("a")
    b = await make_broker("b", broker_id=1, broker_role=BrokerRole.SLAVE,
                          slave_sync_interval=slave_sync_interval)
    await until(lambda: bool(a.state.ha and a.state.ha.connections))
    header = CreateTopicRequestHeader(TOPIC, "TBW102", 2, 2, 6, "SINGLE_TAG")
    created = await call(client, a.addr, RequestCode.UPDATE_AND_CREATE_TOPIC, to_ext(header))
    assert created.code == ResponseCode.SUCCESS, created.remark
    for i in range(4):
        resp = await client.invoke(a.addr, send_request(TOPIC, b"m%d" % i, queue_id=i % 2))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    await until(lambda: TOPIC in b.state.store.topic_queues())
    return a, b


async def test_slave_drops_a_topic_its_master_deleted_and_switchover_keeps_it_gone(
        tmp_path: Path, make_broker: MakeBroker, namesrv: NamesrvController,
        client: RemotingClient) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    a, b = await master_with_topic(make_broker, client, slave_sync_interval=200)
    await until(lambda: b.state.topics.get(TOPIC) is not None)  # a metadata sync ran
    # deleted on the master alone (as Apache's 4.9 mqadmin does): the next sync drops it
    deleted = await call(client, a.addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": TOPIC})
    assert deleted.code == ResponseCode.SUCCESS, deleted.remark
    await until(lambda: not has_topic(b))

    code, _, err = await mqadmin(tmp_path, "switchover", "-n", ns, "-b", "broker-a", "--yes")
    assert code == 0, err
    assert not b.state.is_slave and not has_topic(b)
    await until(lambda: a.state.is_slave)
    await until(lambda: not has_topic(a))  # the old master, now a slave, has none either


async def test_delete_topic_reaches_the_slave_and_failover_keeps_it_gone(
        tmp_path: Path, make_broker: MakeBroker, namesrv: NamesrvController,
        client: RemotingClient) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    # no metadata sync during the test: only deleteTopic itself can reach the slave
    a, b = await master_with_topic(make_broker, client, slave_sync_interval=600_000)
    code, out, err = await mqadmin(tmp_path, "deleteTopic", "-n", ns, "-c", "DefaultCluster",
                                   "-t", TOPIC, "--yes", "-o", "json")
    assert code == 0, err
    assert b.addr in out  # the slave was one of the servers changed
    assert not has_topic(b) and not has_topic(a)

    await a.stop()  # the master is gone
    code, _, err = await mqadmin(tmp_path, "failover", "-n", ns, "-b", "broker-a",
                                 "--accept-loss", "--yes")
    assert code == 0, err
    assert not b.state.is_slave and not has_topic(b)
    assert await route_of(client, ns, TOPIC) is None


async def test_promotion_creates_no_config_for_queues_without_one(
        make_broker: MakeBroker, client: RemotingClient) -> None:
    a, b = await master_with_topic(make_broker, client, slave_sync_interval=600_000)
    b.state.topics.delete(TOPIC)  # queues replicated, config never synced
    await a.stop()
    await b.roles.become_master(1, BrokerRole.ASYNC_MASTER)
    assert b.state.topics.get(TOPIC) is None
    assert TOPIC in b.state.store.topic_queues()  # the messages stay in the store

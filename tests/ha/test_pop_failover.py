"""POP across a switchover: the checkpoints are in the replicated revive topic, so the new master
revives what the old one handed out, and the old receipts still ack there."""

from __future__ import annotations

from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.header.pop import INIT_MODE_MIN
from engine.remoting.client import RemotingClient
from engine.store.config import BrokerRole
from tests.broker.conftest import call
from tests.broker.helpers import send_request
from tests.broker.pop_calls import ack, pop, pop_until
from tests.ha.inproc import MakeBroker, until
from tests.ha.test_roles import role_change

TOPIC = "Jobs"
GROUP = "JobWorkers"


async def test_new_master_revives_what_the_old_one_handed_out(
        make_broker: MakeBroker, namesrv: NamesrvController, client: RemotingClient) -> None:
    a = await make_broker("a", revive_interval=50)
    b = await make_broker("b", broker_id=1, broker_role=BrokerRole.SLAVE, revive_interval=50)
    await until(lambda: bool(a.state.ha and a.state.ha.connections))
    a.state.topics.put(TopicConfig(TOPIC, 1, 1))
    for i in range(6):
        assert (await client.invoke(a.addr, send_request(TOPIC, b"j%d" % i))).code == 0
    popped = (await pop(client, a.addr, GROUP, TOPIC, invisible_ms=1500,
                        init_mode=INIT_MODE_MIN)).messages
    assert len(popped) == 6
    for m in popped[:3]:
        assert (await ack(client, a.addr, m)).code == ResponseCode.SUCCESS
    refused = await pop(client, b.addr, GROUP, TOPIC)
    assert refused.code == ResponseCode.NO_PERMISSION and "slave" in (refused.remark or "")

    fenced = await call(client, a.addr, RequestCode.HA_FENCE_WRITES,
                        {"fenced": "true", "reason": "switchover"})
    final = int((fenced.ext_fields or {})["maxPhyOffset"])
    await until(lambda: b.state.store.get_max_phy_offset() == final
                and b.state.topics.get(TOPIC) is not None)
    promoted = await call(client, b.addr, RequestCode.NOTIFY_BROKER_ROLE_CHANGED,
                          role_change(b.addr, 1, broker_role="SYNC_MASTER"))
    assert promoted.code == ResponseCode.SUCCESS, promoted.remark
    demoted = await call(client, a.addr, RequestCode.NOTIFY_BROKER_ROLE_CHANGED, role_change(
        b.addr, 1, broker_id=1, master_ha_address=b.state.ha_server_addr,
        epoch_start_offset=final))
    assert demoted.code == ResponseCode.SUCCESS, demoted.remark

    assert (await ack(client, b.addr, popped[3])).code == ResponseCode.SUCCESS  # old receipt
    back = await pop_until(client, b.addr, GROUP, TOPIC, 2, invisible_ms=60_000)
    assert sorted(m.body for m in back) == [b"j4", b"j5"]
    assert {m.record.reconsume_times for m in back} == {1}
    again = await pop(client, b.addr, GROUP, TOPIC, poll_ms=500)
    assert again.messages == []  # nothing popped twice from the topic, no acked one back

"""A message delivered as many times as the client's retry policy allows (its settings'
maxAttempts) goes to the group's %DLQ% topic when a receive pops it again, instead of to the
client (5.3.3's receive filter, TO_DLQ): the broker's revive puts it back into the pop retry
topic whatever its count, as 5.3.3's does.  And a group the broker does not let consume,
refused as 5.3.3's local mode refuses it."""

from __future__ import annotations

from engine.protocol.codes import RequestCode, ResponseCode
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.remoting.client import RemotingClient
from tests.broker.conftest import call, pull_all
from tests.proxy.test_receive_gave_up import _until
from tests.proxy.test_receive_rules import TOPIC, Client, client, headers

__all__ = ["client"]

GROUP = "DlqAfterTwo"  # retryMaxTimes 1: maxAttempts 2
CLIENT_ID = "dlq-client-1"


async def _nack(client: Client, msg: pb.Message) -> None:
    change = spb.ChangeInvisibleDurationRequest(
        group=pb.Resource(name=GROUP), topic=pb.Resource(name=TOPIC),
        receipt_handle=msg.system_properties.receipt_handle,
        message_id=msg.system_properties.message_id)
    change.invisible_duration.FromSeconds(0)
    answer = await client.stub.ChangeInvisibleDuration(change, metadata=headers(CLIENT_ID),
                                                       timeout=10)
    assert answer.status.code == pb.OK, answer.status


async def test_past_max_attempts_the_receive_sends_it_to_the_dlq(client: Client) -> None:
    broker = client.ours.broker
    state = broker.state
    queues = range(state.topics.get(TOPIC).read_queue_nums)  # type: ignore[union-attr]
    remoting = RemotingClient()
    try:
        made = await call(remoting, broker.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                          body=b'{"groupName":"%s","consumeEnable":true,"retryMaxTimes":1}'
                          % GROUP.encode())
        assert made.code == ResponseCode.SUCCESS
        telemetry = await client.settings(CLIENT_ID, group=GROUP)  # maxAttempts 2
        await client.send(1)
        attempts = []
        for _ in range(20):
            got = await client.receive(5, polling_ms=3000, group=GROUP, client_id=CLIENT_ID)
            for msg in got.messages:
                attempts.append(msg.system_properties.delivery_attempt)
                await _nack(client, msg)
            if len(attempts) == 2:
                break
        assert attempts == [1, 2]
        dlq = f"%DLQ%{GROUP}"
        for _ in range(20):  # the receive that pops it a third time hands it to nobody
            got = await client.receive(5, polling_ms=3000, group=GROUP, client_id=CLIENT_ID)
            assert got.messages == []
            if state.store.get_max_offset_in_queue(dlq, 0) >= 1:
                break
        await _until(lambda: sum(state.pop.inflight(TOPIC, GROUP, q) for q in queues) == 0)
        (dead,) = await pull_all(remoting, broker, dlq)
        assert dead.body == b"rule"
        # sent back from the pop retry topic it was revived into: 5.3.3's send-back names
        # the stored message's topic when RETRY_TOPIC is not set (its revive sets none)
        assert dead.properties()["RETRY_TOPIC"] == f"%RETRY%{GROUP}_{TOPIC}"
        assert dead.reconsume_times == 3  # revived twice, then sent back
        assert (dead.properties()["DELAY"], dead.properties()["WAIT"]) == ("0", "false")
        await telemetry.done_writing()
    finally:
        await remoting.close()


async def test_a_fifo_message_past_max_attempts_goes_to_the_dlq(client: Client) -> None:
    """FIFO messages stay in their queue (no retry topic, no revive into the DLQ): the
    receive's filter is what ends their redelivery, as on 5.3.3."""
    broker = client.ours.broker
    topic, group, client_id = "RulesFifo", "FifoDlqAfterTwo", "dlq-fifo-client-1"
    await client.ours.create_topic(topic, 1, "FIFO")
    remoting = RemotingClient()
    try:
        made = await call(remoting, broker.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                          body=b'{"groupName":"%s","consumeEnable":true,"retryMaxTimes":1,'
                          b'"consumeMessageOrderly":true}' % group.encode())
        assert made.code == ResponseCode.SUCCESS
        telemetry = await client.settings(client_id, group=group, topic=topic)
        msg = pb.Message(topic=pb.Resource(name=topic), body=b"fifo poison")
        msg.system_properties.message_id = "01F1F0D1Q000000000000000001"
        msg.system_properties.message_group = "g1"
        sent = await client.stub.SendMessage(spb.SendMessageRequest(messages=[msg]),
                                             metadata=headers(client_id), timeout=10)
        assert sent.status.code == pb.OK, sent.status
        dlq = f"%DLQ%{group}"
        attempts = []
        for _ in range(20):
            got = await client.receive(5, polling_ms=3000, topic=topic, group=group,
                                       client_id=client_id)
            for m in got.messages:
                attempts.append(m.system_properties.delivery_attempt)
                change = spb.ChangeInvisibleDurationRequest(
                    group=pb.Resource(name=group), topic=pb.Resource(name=topic),
                    receipt_handle=m.system_properties.receipt_handle,
                    message_id=m.system_properties.message_id)
                change.invisible_duration.FromSeconds(0)
                await client.stub.ChangeInvisibleDuration(change, metadata=headers(client_id),
                                                          timeout=10)
            if broker.state.store.get_max_offset_in_queue(dlq, 0) >= 1:
                break
        assert attempts == [1, 2]
        (dead,) = await pull_all(remoting, broker, dlq)
        assert (dead.body, dead.reconsume_times) == (b"fifo poison", 1)
        assert dead.properties()["RETRY_TOPIC"] == topic
        await telemetry.done_writing()
    finally:
        await remoting.close()


async def test_a_group_not_allowed_to_consume_is_refused_as_5_3_3_local_mode(
        client: Client) -> None:
    """The broker's NO_PERMISSION to a POP: INTERNAL_SERVER_ERROR with its remark, as 5.3.3's
    local mode answers every refusal of a pop (its cluster mode maps the code)."""
    broker = client.ours.broker
    group = "NotConsuming"
    remoting = RemotingClient()
    try:
        made = await call(remoting, broker.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                          body=b'{"groupName":"%s","consumeEnable":false}' % group.encode())
        assert made.code == ResponseCode.SUCCESS
    finally:
        await remoting.close()
    telemetry = await client.settings("not-consuming-1", group=group)
    got = await client.receive(5, polling_ms=3000, group=group, client_id="not-consuming-1")
    await telemetry.done_writing()
    assert (got.code, got.status and got.status.message) == (
        pb.INTERNAL_SERVER_ERROR, f"subscription group no permission, {group}")

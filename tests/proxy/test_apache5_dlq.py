"""Retries into the dead-letter queue through Apache 5.3.3's proxy and through ours, for a
NORMAL and a FIFO topic (opt-in, APACHE_RMQ5_HOME): the same delivery attempts before the
message stops coming, and the same %DLQ% message (reconsume times, properties).

Raw stubs, as a PushConsumer whose listener fails calls them: each delivery nacked
(ChangeInvisibleDuration 1 s) until the group's retry policy (retryMaxTimes 1: two attempts)
is used up; receives go on until the message is in the group's DLQ, read from the broker with
a 4.x remoting pull.  FIFO and NORMAL alike: the whole dead message compared.  A NORMAL one is
put back into the pop retry topic by the revive after its last attempt and sent to the DLQ by
the receive that pops it next (reconsume times 3 for retryMaxTimes 1, RETRY_TOPIC the pop retry
topic, DELAY 0, WAIT false), on both, at the same point: the receive held when the revive
puts it back is not woken (the V1 pop retry topic), the one after it forwards it, about 20 s
after the last nack.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient
from tests.apache5 import Apache5, apache5, needs_apache5
from tests.broker.conftest import call
from tests.proxy.conftest import running_stack
from tests.proxy.differential import dead_letters, described, routed, topic_creator
from tests.proxy.test_receive_rules import Client, headers

pytestmark = [needs_apache5, pytest.mark.timeout(900)]
NACK_S = 1
#: How far apart the two proxies may put the dead letter (seconds after the last nack).
TOLERANCE_S = 2.5
__all__ = ["apache5"]

async def _group(remoting: RemotingClient, broker: str, group: str, *, orderly: bool) -> None:
    body = json.dumps({"groupName": group, "consumeEnable": True, "retryMaxTimes": 1,
                       "consumeMessageOrderly": orderly})
    made = await call(remoting, broker, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                      body=body.encode())
    assert made.code == ResponseCode.SUCCESS, made.remark


async def _until_dead(client: Client, remoting: RemotingClient, broker: str, topic: str,
                      group: str, client_id: str) -> tuple[list[int], Any, float]:
    """Receive and nack until the group's DLQ holds the message: the attempts delivered, the
    dead record, the seconds from the last nack."""
    attempts: list[int] = []
    last = time.monotonic()
    for _ in range(12):
        dead = await dead_letters(remoting, broker, group)
        if dead:
            return attempts, dead[0], time.monotonic() - last
        got = await client.receive(25, topic=topic, group=group, client_id=client_id,
                                   polling_ms=20_000, invisible_ms=10_000)
        for msg in got.messages:
            attempts.append(msg.system_properties.delivery_attempt)
            change = spb.ChangeInvisibleDurationRequest(
                group=pb.Resource(name=group), topic=pb.Resource(name=topic),
                receipt_handle=msg.system_properties.receipt_handle,
                message_id=msg.system_properties.message_id)
            change.invisible_duration.FromSeconds(NACK_S)
            answer = await client.stub.ChangeInvisibleDuration(
                change, metadata=headers(client_id), timeout=10)
            assert answer.status.code == pb.OK, answer.status
            last = time.monotonic()
    raise AssertionError(f"never in %DLQ%{group}: attempts {attempts}")


async def scenario(endpoint: str, broker: str) -> tuple[dict[str, Any], dict[str, float]]:
    tag = f"{time.time_ns() % 10**9:09d}"
    seen: dict[str, Any] = {}
    took: dict[str, float] = {}
    create = topic_creator(broker)
    remoting = RemotingClient()
    try:
        async with grpc.aio.insecure_channel(endpoint) as channel:
            client = Client(service_pb2_grpc.MessagingServiceStub(channel), endpoint,
                            lambda t: create(t, 1, None))
            for kind, message_type in (("normal", None), ("fifo", "FIFO")):
                topic, group = f"Dlq{kind}{tag}", f"DlqGroup{kind}{tag}"
                client_id = f"dlq-{kind}-{tag}"
                await create(topic, 1, message_type)
                await routed(client.stub, topic)
                await _group(remoting, broker, group, orderly=message_type == "FIFO")
                telemetry = await client.settings(client_id, group=group, topic=topic)
                msg = pb.Message(topic=pb.Resource(name=topic), body=b"poison",
                                 user_properties={"k": "v"})
                msg.system_properties.message_id = f"01DLQ{time.time_ns():020X}"
                msg.system_properties.tag = "TagA"
                msg.system_properties.keys.append("KeyA")
                if message_type:
                    msg.system_properties.message_group = "g1"
                sent = await client.stub.SendMessage(spb.SendMessageRequest(messages=[msg]),
                                                     metadata=headers(client_id), timeout=10)
                assert sent.status.code == pb.OK, sent.status
                attempts, dead, took[kind] = await _until_dead(client, remoting, broker, topic,
                                                               group, client_id)
                seen[f"{kind} attempts"] = attempts
                seen[f"{kind} dead"] = described(dead, tag)
                after = await client.receive(8, topic=topic, group=group, client_id=client_id,
                                             polling_ms=5000)
                seen[f"{kind} after"] = (after.code, len(after.messages))
                await telemetry.done_writing()
    finally:
        await remoting.close()
    return seen, took


async def test_dead_letters_as_apache_5_3_3(apache5: Apache5, tmp_path: Path,
                                            namesrv: NamesrvController) -> None:
    theirs = await scenario(apache5.grpc, apache5.broker)
    async with running_stack(tmp_path, namesrv) as stack:
        ours = await scenario(stack.endpoint, stack.broker.addr)
    print("ours", ours, "\ntheirs", theirs)
    normal = theirs[0]["normal dead"]
    assert normal["reconsume"] == 3  # the revive's put back once more, then the send-back
    assert normal["properties"]["RETRY_TOPIC"] == "%RETRY%DlqGroupnormal*_Dlqnormal*"
    assert (normal["properties"]["DELAY"], normal["properties"]["WAIT"]) == ("0", "false")
    # 5.3.3 stores MSG_REGION and TRACE_ON in every message its send hooks see (ours answers
    # them in the send's response only): docs/proxy.md "What differs"
    for seen in (ours[0], theirs[0]):
        for kind in ("normal", "fifo"):
            for key in ("MSG_REGION", "TRACE_ON"):
                seen[f"{kind} dead"]["properties"].pop(key, None)
    assert ours[0] == theirs[0]
    for kind in ("normal", "fifo"):
        assert abs(ours[1][kind] - theirs[1][kind]) < TOLERANCE_S, (kind, ours[1], theirs[1])

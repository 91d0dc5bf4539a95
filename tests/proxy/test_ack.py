"""AckMessage through the proxy: one ACK_MESSAGE per entry, or (enableBatchAck) one
BATCH_ACK_MESSAGE per broker, and 5.3's refusal of a receipt handle past its invisible time.

Raw generated stubs, so a test can ack many messages in one call and hand the proxy receipt
handles a client would not make.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from engine.namesrv.controller import NamesrvController
from engine.protocol.receipt import ExtraInfo
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from tests.proxy.conftest import Stack, running_stack
from tests.proxy.test_simple_consumer import CONSUMER_PROXY, QUICK_REVIVE, broker_pops

GROUP = "AckGroup"
TOPIC = "Acks"
HEADERS = (("x-mq-client-id", "ack-client-1"), ("x-mq-language", "PYTHON"),
           ("x-mq-client-version", "5.1.2"), ("x-mq-protocol", "GRPC_V2"))
TIMEOUT = 10


@dataclasses.dataclass
class Acking:
    stack: Stack
    stub: service_pb2_grpc.MessagingServiceStub

    async def send(self, count: int) -> list[str]:
        ids = [f"01ACK{n:027X}" for n in range(count)]
        messages = []
        for msg_id in ids:
            msg = pb.Message(topic=pb.Resource(name=TOPIC), body=b"ack me")
            msg.system_properties.message_id = msg_id
            msg.system_properties.tag = "TagA"
            messages.append(msg)
        for msg in messages:  # one call each: they spread over the topic's queues
            answer = await self.stub.SendMessage(spb.SendMessageRequest(messages=[msg]),
                                                 metadata=HEADERS, timeout=TIMEOUT)
            assert answer.status.code == pb.OK, answer.status
        return ids

    async def receive(self, invisible_ms: int = 30_000, polling_ms: int = 2000
                      ) -> list[pb.Message]:
        req = spb.ReceiveMessageRequest(
            group=pb.Resource(name=GROUP), batch_size=32, auto_renew=False,
            message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=-1),
            filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"))
        req.invisible_duration.FromMilliseconds(invisible_ms)
        req.long_polling_timeout.FromMilliseconds(polling_ms)
        got = []
        async for resp in self.stub.ReceiveMessage(req, metadata=HEADERS, timeout=TIMEOUT):
            if resp.WhichOneof("content") == "message":
                got.append(resp.message)
        return got

    async def receive_all(self, count: int, invisible_ms: int = 30_000) -> list[pb.Message]:
        got: list[pb.Message] = []
        for _ in range(20):
            got += await self.receive(invisible_ms)
            if len(got) >= count:
                break
        return got

    async def ack(self, entries: list[tuple[str, str]]) -> spb.AckMessageResponse:
        return await self.stub.AckMessage(spb.AckMessageRequest(
            group=pb.Resource(name=GROUP), topic=pb.Resource(name=TOPIC),
            entries=[spb.AckMessageEntry(message_id=m, receipt_handle=h) for m, h in entries]),
            metadata=HEADERS, timeout=TIMEOUT)


@pytest.fixture(params=[False, True], ids=["one-by-one", "batch"])
async def acking(request: pytest.FixtureRequest, tmp_path: Path,
                 namesrv: NamesrvController) -> AsyncIterator[Acking]:
    # long polls up to 3 s: the last receive of a test polls longer than an invisible time
    config = dataclasses.replace(CONSUMER_PROXY, enable_batch_ack=request.param,
                                 grpc_client_consumer_max_long_polling_timeout_millis=3000)
    async with running_stack(tmp_path, namesrv, config, **QUICK_REVIVE) as stack:
        if not await broker_pops(stack):
            pytest.skip("the broker does not serve POP_MESSAGE")
        await stack.create_topic(TOPIC)
        async with grpc.aio.insecure_channel(stack.endpoint) as channel:
            yield Acking(stack, service_pb2_grpc.MessagingServiceStub(channel))


def _handle(msg: pb.Message) -> tuple[str, str]:
    return msg.system_properties.message_id, msg.system_properties.receipt_handle


async def test_one_ack_of_many_messages_acks_them_all(acking: Acking) -> None:
    ids = await acking.send(40)
    got = await acking.receive_all(40, invisible_ms=1000)
    assert sorted(m.system_properties.message_id for m in got) == sorted(ids)
    answer = await acking.ack([_handle(m) for m in got])
    assert answer.status.code == pb.OK, answer.status
    assert [e.message_id for e in answer.entries] == [m.system_properties.message_id
                                                      for m in got]
    assert {e.status.code for e in answer.entries} == {pb.OK}
    # Acked, none comes back after its invisible second (the long poll outlasts it and the
    # revive's 200 ms rounds).
    assert await acking.receive(polling_ms=2000) == []


async def test_an_expired_receipt_handle_is_refused_and_the_others_acked(
        acking: Acking) -> None:
    await acking.send(3)
    got = await acking.receive_all(3)
    first_id, first_handle = _handle(got[0])
    info = ExtraInfo.parse(first_handle)
    expired = dataclasses.replace(info, pop_time=info.pop_time - info.invisible_time - 1)
    stale = f"{expired.encode()} {first_handle.rsplit(' ', 1)[1]}"
    answer = await acking.ack([(first_id, stale)] + [_handle(m) for m in got[1:]])
    assert answer.status.code == pb.MULTIPLE_RESULTS
    codes = [(e.status.code, e.status.message) for e in answer.entries]
    assert codes[0] == (pb.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
    assert {c for c, _ in codes[1:]} == {pb.OK}
    # The refused one was not acked: its own (unexpired) handle still acks it.
    answer = await acking.ack([_handle(got[0])])
    assert answer.status.code == pb.OK, answer.status


async def test_an_unreadable_receipt_handle_is_refused(acking: Acking) -> None:
    answer = await acking.ack([("01" + "0" * 32, "not a receipt handle")])
    assert answer.status.code == pb.INVALID_RECEIPT_HANDLE
    assert answer.entries[0].status.code == pb.INVALID_RECEIPT_HANDLE

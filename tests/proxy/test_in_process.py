"""Local mode's in-process path: the proxy's requests to its own broker skip the socket, not
the broker's access guard nor its rpc metrics."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import grpc

from engine.broker.config import MetricsExporterType
from engine.broker.metrics.rpc import TimedDispatcher
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.header.broker import GetTopicConfigRequestHeader
from engine.protocol.signature import Credentials
from engine.protocol.wire import to_ext
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient
from engine.remoting.inprocess import InProcessConnection
from tests.proxy.conftest import Stack, running_stack, stored
from tests.proxy.official import ClientConfiguration, Signature
from tests.proxy.official import Credentials as OfficialCredentials

HEADERS = (("x-mq-client-id", "in-process-1"), ("x-mq-language", "PYTHON"),
           ("x-mq-client-version", "5.1.2"), ("x-mq-protocol", "GRPC_V2"))


async def send_one(stack: Stack, topic: str, message_id: str,
                   metadata: Sequence[tuple[str, str]] = HEADERS) -> spb.SendMessageResponse:
    msg = pb.Message(topic=pb.Resource(name=topic), body=b"in process")
    msg.system_properties.message_id = message_id
    async with grpc.aio.insecure_channel(stack.endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        answer: spb.SendMessageResponse = await stub.SendMessage(
            spb.SendMessageRequest(messages=[msg]), metadata=tuple(metadata), timeout=10)
    return answer


async def test_sends_reach_the_broker_in_process_and_are_timed(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    async with running_stack(tmp_path, namesrv,
                             metrics_exporter_type=MetricsExporterType.PROM,
                             metrics_prom_exporter_host="127.0.0.1",
                             metrics_prom_exporter_port=0) as stack:
        await stack.create_topic("InProcess")
        answer = await send_one(stack, "InProcess", "01INPROCESS0000000000000001")
        assert answer.status.code == pb.OK, answer.status
        record = await stored(stack, "InProcess", "01INPROCESS0000000000000001")
        assert record.body == b"in process"

        conn = await stack.proxy.gateway.remoting.connection(stack.broker.addr)
        assert isinstance(conn, InProcessConnection)
        assert conn.server_end in stack.broker.server.connections
        dispatcher = stack.broker.server.dispatcher
        assert isinstance(dispatcher, TimedDispatcher)
        sends = sum(sum(counts[:-1])  # the last slot sums the milliseconds
                    for (code, response, _, _), counts in dispatcher.latency.table.items()
                    if code == RequestCode.SEND_MESSAGE_V2 and response == ResponseCode.SUCCESS)
        assert sends >= 1


def topic_config_request(topic: str) -> RemotingCommand:
    return request(RequestCode.GET_TOPIC_CONFIG,
                   to_ext(GetTopicConfigRequestHeader(topic=topic)))


async def test_the_broker_guard_checks_in_process_requests(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    inner = ("inner", "inner-secret")
    async with running_stack(
            tmp_path, namesrv, authentication_enabled=True, authorization_enabled=True,
            init_authentication_user=json.dumps({"username": "admin", "password": "secret"}),
            inner_client_authentication_credentials=json.dumps(
                {"accessKey": inner[0], "secretKey": inner[1]})) as stack:
        await stack.create_topic("Guarded")
        broker = stack.broker
        answers: dict[str, RemotingCommand] = {}
        for name, creds, in_process in (
                ("socket, unsigned", None, False), ("in process, unsigned", None, True),
                ("in process, signed", Credentials(*inner), True)):
            client = RemotingClient(credentials=creds)
            if in_process:
                client.reach_in_process(
                    broker.addr, lambda d, c: broker.server.connect_in_process(
                        client_dispatcher=d, client_on_close=c))
            try:
                answers[name] = await client.invoke(broker.addr, topic_config_request("Guarded"))
                assert isinstance(await client.connection(broker.addr),
                                  InProcessConnection) is in_process
            finally:
                await client.close()
        refused = answers["socket, unsigned"]
        assert refused.code != ResponseCode.SUCCESS
        assert (answers["in process, unsigned"].code, answers["in process, unsigned"].remark) == (
            refused.code, refused.remark)
        assert answers["in process, signed"].code == ResponseCode.SUCCESS
        # over gRPC: an unsigned send is refused, a signed one goes in process and is stored
        answer = await send_one(stack, "Guarded", "01INPROCESS0000000000000002")
        assert answer.status.code == pb.UNAUTHORIZED, answer.status
        signed = Signature.metadata(
            ClientConfiguration(stack.endpoint, OfficialCredentials("admin", "secret")),
            "in-process-1")
        answer = await send_one(stack, "Guarded", "01INPROCESS0000000000000003", signed)
        assert answer.status.code == pb.OK, answer.status
        assert isinstance(await stack.proxy.gateway.remoting.connection(broker.addr),
                          InProcessConnection)


async def test_closing_either_end_closes_both(tmp_path: Path,
                                              namesrv: NamesrvController) -> None:
    async with running_stack(tmp_path, namesrv) as stack:
        await stack.create_topic("Closing")
        assert (await send_one(stack, "Closing", "01INPROCESS0000000000000005")).status.code \
            == pb.OK
        gateway = stack.proxy.gateway.remoting
        first = await gateway.connection(stack.broker.addr)
        assert isinstance(first, InProcessConnection) and first.server_end is not None
        first.server_end.close()  # e.g. the broker's idle-connection janitor
        await first.wait_closed()
        assert first.closed and first.server_end not in stack.broker.server.connections
        # the next call makes a new in-process connection
        assert (await send_one(stack, "Closing", "01INPROCESS0000000000000004")).status.code \
            == pb.OK
        second = await gateway.connection(stack.broker.addr)
        assert isinstance(second, InProcessConnection) and second is not first

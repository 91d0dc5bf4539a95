"""One gRPC scenario through Apache 5.3.3's proxy and through ours: the same answers (opt-in,
APACHE_RMQ5_HOME; tests/apache5.py starts Apache's name server and broker with its proxy)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import grpc
import pytest

from engine.client.admin.broker import BrokerAdmin
from engine.namesrv.controller import NamesrvController
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient
from tests.apache5 import Apache5, apache5, needs_apache5
from tests.proxy.conftest import running_stack
from tests.proxy.differential import CreateTopic, topic_creator

pytestmark = [needs_apache5, pytest.mark.timeout(300)]
__all__ = ["apache5"]

HEADERS = (("x-mq-client-id", "compare-client-1"), ("x-mq-language", "PYTHON"),
           ("x-mq-client-version", "5.1.2"), ("x-mq-protocol", "GRPC_V2"))
TIMEOUT = 10
GROUPS = ("order-1", "order-42", "order-777", "customer-9")


def _message(topic: str, n: int, group: str = "") -> pb.Message:
    msg = pb.Message(topic=pb.Resource(name=topic), body=b"compare")
    msg.system_properties.message_id = f"01C0MPARE{n:024X}"
    if group:
        msg.system_properties.message_group = group
    return msg


async def scenario(endpoint: str, broker_addr: str, create: CreateTopic) -> dict[str, Any]:
    """What a proxy answers to a fixed set of calls (statuses, routes, settings, queues)."""
    seen: dict[str, Any] = {}
    await create("CmpNormal", 4, None)
    await create("CmpFifo", 8, "FIFO")
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.UpdateOffset(spb.UpdateOffsetRequest(), metadata=HEADERS, timeout=TIMEOUT)
        seen["UpdateOffset"] = info.value.code().name
        seen["no client id"] = (await stub.QueryRoute(spb.QueryRouteRequest(
            topic=pb.Resource(name="CmpNormal")), timeout=TIMEOUT)).status.code
        seen["heartbeat first"] = (await stub.Heartbeat(
            spb.HeartbeatRequest(), metadata=HEADERS, timeout=TIMEOUT)).status.code
        seen["missing topic"] = (await stub.QueryRoute(spb.QueryRouteRequest(
            topic=pb.Resource(name="CmpNope")), metadata=HEADERS, timeout=TIMEOUT)).status.code
        for topic in ("CmpNormal", "CmpFifo"):
            for _ in range(100):  # the topic reaches the name server in the background
                route = await stub.QueryRoute(spb.QueryRouteRequest(
                    topic=pb.Resource(name=topic)), metadata=HEADERS, timeout=TIMEOUT)
                if route.status.code == pb.OK:
                    break
                await asyncio.sleep(0.1)
            seen[f"route {topic}"] = [(q.id, q.permission, list(q.accept_message_types))
                                      for q in route.message_queues]
        settings = pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(
            topics=[pb.Resource(name="CmpNormal")]))
        call = stub.Telemetry(metadata=HEADERS, timeout=TIMEOUT)
        await call.write(spb.TelemetryCommand(settings=settings))
        answer = await call.read()
        await call.done_writing()
        got = answer.settings
        seen["settings"] = (answer.status.code, got.publishing.max_body_size,
                            got.publishing.validate_message_type, got.backoff_policy.max_attempts,
                            got.backoff_policy.exponential_backoff.initial.ToMilliseconds(),
                            got.backoff_policy.exponential_backoff.max.ToMilliseconds(),
                            got.backoff_policy.exponential_backoff.multiplier, got.metric.on)
        consumer = pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=pb.Subscription(
            group=pb.Resource(name="CmpGroup"), subscriptions=[pb.SubscriptionEntry(
                topic=pb.Resource(name="CmpNormal"),
                expression=pb.FilterExpression(type=pb.TAG, expression="*"))]))
        call = stub.Telemetry(metadata=(("x-mq-client-id", "compare-consumer-1"),
                                        *HEADERS[1:]), timeout=TIMEOUT)
        await call.write(spb.TelemetryCommand(settings=consumer))
        answer = await call.read()
        await call.done_writing()
        sub, backoff = answer.settings.subscription, answer.settings.backoff_policy
        seen["consumer settings"] = (
            answer.status.code, sub.fifo, sub.receive_batch_size,
            sub.long_polling_timeout.ToMilliseconds(), backoff.max_attempts,
            backoff.WhichOneof("strategy"),
            [d.ToMilliseconds() for d in backoff.customized_backoff.next])
        seen["fifo to normal topic"] = (await stub.SendMessage(spb.SendMessageRequest(
            messages=[_message("CmpNormal", 0, "g")]), metadata=HEADERS,
            timeout=TIMEOUT)).status.code
        seen["normal to fifo topic"] = (await stub.SendMessage(spb.SendMessageRequest(
            messages=[_message("CmpFifo", 1)]), metadata=HEADERS, timeout=TIMEOUT)).status.code
        for n, group in enumerate(GROUPS, start=2):
            sent = await stub.SendMessage(spb.SendMessageRequest(
                messages=[_message("CmpFifo", n, group)]), metadata=HEADERS, timeout=TIMEOUT)
            assert sent.status.code == pb.OK, sent.status
    client = RemotingClient()
    try:
        stats = await BrokerAdmin(client).topic_stats(broker_addr, "CmpFifo")
    finally:
        await client.close()
    # Which queues the four groups' messages went to (the same groups, the same queues).
    seen["fifo queues"] = sorted(mq.queue_id for mq, o in stats.offset_table.items()
                                 if o.max_offset > 0)
    return seen


async def test_our_proxy_answers_as_apache_5_3_3(apache5: Apache5, tmp_path: Path,
                                                  namesrv: NamesrvController) -> None:
    theirs = await scenario(apache5.grpc, apache5.broker, topic_creator(apache5.broker))
    async with running_stack(tmp_path, namesrv) as stack:
        async def create(topic: str, queues: int, message_type: str | None) -> None:
            await stack.create_topic(topic, queues, message_type)
        ours = await scenario(stack.endpoint, stack.broker.addr, create)
    assert ours == theirs


async def tls_and_plaintext(endpoint: str) -> dict[str, Any]:
    """How a proxy's gRPC port answers a TLS client and a plaintext one (its defaults)."""
    host, _, port = endpoint.rpartition(":")
    cert = await asyncio.to_thread(ssl.get_server_certificate, (host, int(port)))
    seen: dict[str, Any] = {}
    tls = grpc.aio.secure_channel(
        endpoint, grpc.ssl_channel_credentials(root_certificates=cert.encode()),
        options=[("grpc.ssl_target_name_override", "localhost")])
    for name, channel in (("tls", tls), ("plaintext", grpc.aio.insecure_channel(endpoint))):
        async with channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            seen[name] = (await stub.QueryRoute(spb.QueryRouteRequest(
                topic=pb.Resource(name="CmpNope")), metadata=HEADERS, timeout=TIMEOUT)
                          ).status.code
    return seen


async def test_our_port_serves_tls_and_plaintext_as_apache_5_3_3(
        apache5: Apache5, tmp_path: Path, namesrv: NamesrvController) -> None:
    theirs = await tls_and_plaintext(apache5.grpc)
    async with running_stack(tmp_path, namesrv) as stack:
        ours = await tls_and_plaintext(f"127.0.0.1:{stack.proxy.port}")
    assert ours == theirs == {"tls": pb.TOPIC_NOT_FOUND, "plaintext": pb.TOPIC_NOT_FOUND}

"""Access control over gRPC: the 5.x signature checked against the broker's users and rules."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from engine.auth.model import (
    Acl,
    Action,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    User,
    UserType,
)
from engine.namesrv.controller import NamesrvController
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from tests.proxy.conftest import Stack, in_thread, running_stack
from tests.proxy.official import ClientConfiguration, Credentials, Message, Producer, Signature

ADMIN = ("admin", "admin-secret")


@pytest.fixture
async def secured(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Stack]:
    async with running_stack(
            tmp_path, namesrv, authentication_enabled=True, authorization_enabled=True,
            init_authentication_user=json.dumps({"username": ADMIN[0], "password": ADMIN[1]}),
            inner_client_authentication_credentials=json.dumps(
                {"accessKey": "inner", "secretKey": "inner-secret"})) as stack:
        stack.broker.access.store.create_user(User("alice", "alice-secret", UserType.NORMAL))
        await stack.create_topic("Secure")
        yield stack


async def query_route(stack: Stack, ak: str, sk: str, *, signed: bool = True) -> pb.Status:
    """One QueryRoute with the headers the official client sends (its own signing code)."""
    config = ClientConfiguration(stack.endpoint, Credentials(ak, sk))
    metadata = Signature.metadata(config, "test-client-1")
    if not signed:
        metadata = [(k, v) for k, v in metadata if k != "authorization"]
    async with grpc.aio.insecure_channel(stack.endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        response = await stub.QueryRoute(
            spb.QueryRouteRequest(topic=pb.Resource(name="Secure")), metadata=metadata,
            timeout=5)
    return response.status


async def test_signed_calls_of_a_super_user_are_served(secured: Stack) -> None:
    assert (await query_route(secured, *ADMIN)).code == pb.OK
    producer = Producer(ClientConfiguration(secured.endpoint, Credentials(*ADMIN)), ("Secure",))
    await in_thread(producer.startup)
    try:
        msg = Message()
        msg.topic, msg.body = "Secure", b"signed"
        receipt = await in_thread(producer.send, msg)
    finally:
        await in_thread(producer.shutdown)
    assert receipt.message_id


async def test_a_wrong_secret_is_refused_unauthorized(secured: Stack,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    status = await query_route(secured, ADMIN[0], "not-the-secret")
    assert status.code == pb.UNAUTHORIZED
    assert "signature check failed" in status.message
    producer = Producer(ClientConfiguration(secured.endpoint, Credentials(ADMIN[0], "nope")),
                        ("Secure",))
    await in_thread(producer.startup)
    try:
        msg = Message()
        msg.topic, msg.body = "Secure", b"refused"
        with pytest.raises(Exception, match="route"):
            await in_thread(producer.send, msg)
    finally:
        await in_thread(producer.shutdown)
    # The client cannot even read the route: its log shows the proxy's 40100 answer.
    assert "40100" in caplog.text and "signature check failed" in caplog.text


async def test_unsigned_and_unknown_users_are_refused(secured: Stack) -> None:
    unsigned = await query_route(secured, *ADMIN, signed=False)
    assert unsigned.code == pb.UNAUTHORIZED
    assert "not signed" in unsigned.message
    unknown = await query_route(secured, "mallory", "x")
    assert unknown.code == pb.UNAUTHORIZED
    assert "unknown AccessKey" in unknown.message


async def test_rules_apply_to_a_normal_user(secured: Stack) -> None:
    # alice signs correctly but no rule grants her the topic: the remoting rules decide.
    status = await query_route(secured, "alice", "alice-secret")
    assert status.code == pb.UNAUTHORIZED
    assert "no rule allows" in status.message


async def test_a_rule_granting_pub_lets_a_normal_user_send(secured: Stack) -> None:
    secured.broker.access.store.put_acl(Acl("User:alice", (Policy(PolicyType.CUSTOM, (
        PolicyEntry(Resource.parse("Topic:Secure"), (Action.PUB,)),)),)))
    assert (await query_route(secured, "alice", "alice-secret")).code == pb.OK
    producer = Producer(ClientConfiguration(secured.endpoint,
                                            Credentials("alice", "alice-secret")), ("Secure",))
    await in_thread(producer.startup)
    try:
        msg = Message()
        msg.topic, msg.body = "Secure", b"allowed"
        assert (await in_thread(producer.send, msg)).message_id
    finally:
        await in_thread(producer.shutdown)

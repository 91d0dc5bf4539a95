"""Access control with the proxy.  In the broker (`--enable-proxy`), without an inner
credential: the official Python client, signed as an account allowed Pub and Sub, sends,
receives and acks on a NORMAL and a FIFO topic, with 4.9's plain_acl.yml (`aclEnable`) and
with ACL 2.0 rules; a wrong secret is refused UNAUTHORIZED (40100).  As in 5.3.3's local mode,
the proxy's own calls to its broker are the broker's own: the client is checked once, at the
proxy.  In cluster mode (`mqproxy`) the proxy checks clients against the users under
authConfigPath and signs its remoting calls with innerClientAuthenticationCredentials."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.auth.model import Acl, Action, Policy, PolicyEntry, PolicyType, Resource, User, UserType
from engine.client.admin.broker import BrokerAdmin
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.protocol.signature import Credentials as SignedAs
from engine.proxy.config import ProxyConfig
from engine.proxy.main import cluster_auth
from engine.proxy.server import ProxyServer
from engine.remoting.client import RemotingClient
from tests.proxy.conftest import Stack, in_thread, running_stack
from tests.proxy.nodejs import NodeClient
from tests.proxy.official import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)

pytestmark = pytest.mark.timeout(120)

APP = ("app-user", "app-secret-1")
GROUP = "AclGroup"
#: Long polls of 1 s to 3 s (5.3.3's minimum is 5 s): an empty receive ends at its await time.
PROXY = ProxyConfig(grpc_server_port=0, topic_route_service_cache_refresh_seconds=1,
                    grpc_client_consumer_min_long_polling_timeout_millis=1000,
                    grpc_client_consumer_max_long_polling_timeout_millis=3000,
                    min_invisible_time_mills_for_recv=1000)
PLAIN_ACL = f"""\
accounts:
  - accessKey: admin-user
    secretKey: admin-secret
    admin: true
  - accessKey: {APP[0]}
    secretKey: {APP[1]}
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [AclNormal=PUB|SUB, AclFifo=PUB|SUB]
    groupPerms: [{GROUP}=SUB]
"""


@contextlib.asynccontextmanager
async def acl_1_0(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Stack]:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    async with running_stack(tmp_path, namesrv, PROXY, acl_enable=True,
                             rocketmq_home=str(home)) as stack:
        yield stack


@contextlib.asynccontextmanager
async def acl_2_0(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Stack]:
    async with running_stack(tmp_path, namesrv, PROXY, authentication_enabled=True,
                             authorization_enabled=True,
                             init_authentication_user='{"username":"admin-user",'
                                                      '"password":"admin-secret"}') as stack:
        store = stack.broker.access.store
        store.create_user(User(APP[0], APP[1], UserType.NORMAL))
        store.put_acl(Acl(f"User:{APP[0]}", (Policy(PolicyType.CUSTOM, (
            PolicyEntry(Resource.parse("Topic:AclNormal"), (Action.PUB, Action.SUB)),
            PolicyEntry(Resource.parse("Topic:AclFifo"), (Action.PUB, Action.SUB)),
            PolicyEntry(Resource.parse(f"Group:{GROUP}"), (Action.SUB,)))),)))
        yield stack


async def _create_topics(stack: Stack) -> None:
    client = RemotingClient(credentials=SignedAs("admin-user", "admin-secret"))
    try:
        for topic, kind in (("AclNormal", None), ("AclFifo", "FIFO")):
            await BrokerAdmin(client).create_topic(
                stack.broker.addr, TopicConfig(topic, 4, 4),
                attributes={"+message.type": kind} if kind else None)
    finally:
        await client.close()


async def _round_trip(stack: Stack, topic: str, *, fifo: bool) -> None:
    config = ClientConfiguration(stack.endpoint, Credentials(*APP))
    producer = Producer(config, (topic,))
    await in_thread(producer.startup)
    try:
        msg = Message()
        msg.topic, msg.body, msg.tag = topic, b"guarded", "T"
        if fifo:
            msg.message_group = "g1"
        sent = await in_thread(producer.send, msg)
    finally:
        await in_thread(producer.shutdown)
    consumer = SimpleConsumer(config, GROUP, {topic: FilterExpression("T")}, await_duration=2)
    await in_thread(consumer.startup)
    try:
        got: list[Message] = []
        for _ in range(10):
            got += await in_thread(consumer.receive, 16, 10) or []
            if got:
                break
        assert [m.message_id for m in got] == [sent.message_id]
        await in_thread(consumer.ack, got[0])
    finally:
        await in_thread(consumer.shutdown)


async def _refused(stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    producer = Producer(ClientConfiguration(stack.endpoint, Credentials(APP[0], "wrong")),
                        ("AclNormal",))
    await in_thread(producer.startup)
    try:
        msg = Message()
        msg.topic, msg.body = "AclNormal", b"refused"
        with pytest.raises(Exception, match="route"):
            await in_thread(producer.send, msg)
    finally:
        await in_thread(producer.shutdown)
    assert "40100" in caplog.text


@pytest.mark.parametrize("secured", [acl_1_0, acl_2_0], ids=["plain_acl.yml", "acl-2.0"])
async def test_an_account_with_pub_and_sub_sends_receives_and_acks(
        tmp_path: Path, namesrv: NamesrvController, caplog: pytest.LogCaptureFixture,
        secured: contextlib.AbstractAsyncContextManager[Stack]) -> None:
    async with secured(tmp_path, namesrv) as stack:  # type: ignore[operator]
        assert stack.broker.access.inner_credentials() is None
        await _create_topics(stack)
        await _round_trip(stack, "AclNormal", fifo=False)
        await _round_trip(stack, "AclFifo", fifo=True)
        await _refused(stack, caplog)


@contextlib.asynccontextmanager
async def cluster_mode(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Stack]:
    inner = {"accessKey": "proxy-inner", "secretKey": "proxy-inner-secret"}
    async with acl_2_0(tmp_path, namesrv) as local:
        local.broker.access.store.create_user(User(inner["accessKey"], inner["secretKey"],
                                                   UserType.SUPER))
        config = dataclasses.replace(
            PROXY, authentication_enabled=True, authorization_enabled=True,
            auth_config_path=os.path.dirname(local.broker.access.store.users_path),
            inner_client_authentication_credentials=json.dumps(inner))
        auth, _ = cluster_auth(config)
        proxy = ProxyServer(config, f"127.0.0.1:{namesrv.port}", host="127.0.0.1", auth=auth,
                            credentials=SignedAs(inner["accessKey"], inner["secretKey"]))
        await proxy.start()
        try:
            yield Stack(local.broker, proxy)
        finally:
            await proxy.stop(grace=0)


async def test_cluster_mode_signs_its_calls_and_checks_its_clients(
        tmp_path: Path, namesrv: NamesrvController, caplog: pytest.LogCaptureFixture) -> None:
    async with cluster_mode(tmp_path, namesrv) as stack:
        await _create_topics(stack)
        await _round_trip(stack, "AclNormal", fifo=False)
        await _round_trip(stack, "AclFifo", fifo=True)
        await _refused(stack, caplog)


async def _node_round_trip(stack: Stack, node_client: NodeClient, topic: str, *,
                           fifo: bool) -> None:
    signed = {"accessKey": APP[0], "accessSecret": APP[1]}
    message: dict[str, object] = {"body": f"node-{topic}", "tag": "T"}
    if fifo:
        message["messageGroup"] = "g1"
    events = await node_client.run("producer.js", endpoint=stack.endpoint, topic=topic,
                                   messages=[message], **signed)
    (sent,) = [e for e in events if e["event"] == "sent"]
    events = await node_client.run("receive_ack.js", endpoint=stack.endpoint, topic=topic,
                                   group=GROUP, tag="T", awaitMs=1000, count=1,
                                   after=False, **signed)
    assert [e["messageId"] for e in events if e["event"] == "received"] == [sent["messageId"]]
    assert [e["messageId"] for e in events if e["event"] == "acked"] == [sent["messageId"]]


@pytest.mark.parametrize("secured", [acl_1_0, acl_2_0], ids=["plain_acl.yml", "acl-2.0"])
async def test_the_node_client_with_pub_and_sub_sends_receives_and_acks(
        tmp_path: Path, namesrv: NamesrvController, node_client: NodeClient,
        secured: contextlib.AbstractAsyncContextManager[Stack]) -> None:
    async with secured(tmp_path, namesrv) as stack:  # type: ignore[operator]
        await _create_topics(stack)
        await _node_round_trip(stack, node_client, "AclNormal", fifo=False)
        await _node_round_trip(stack, node_client, "AclFifo", fifo=True)
        async with node_client.start("producer.js", endpoint=stack.endpoint, topic="AclNormal",
                                     accessKey=APP[0], accessSecret="wrong",
                                     messages=[{"body": "refused"}],
                                     startupBackoffMs=100) as scenario:
            error = await scenario.next("error")
        assert error["causes"][-1]["code"] == 40100, error

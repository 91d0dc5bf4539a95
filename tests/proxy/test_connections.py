"""gRPC clients as the brokers see them: producerConnection / consumerConnection list each one."""

from __future__ import annotations

from engine.client.admin.broker import BrokerAdmin
from engine.protocol.codes import LanguageCode
from engine.protocol.version import version_ordinal
from engine.remoting.client import RemotingClient
from tests.proxy.conftest import Stack, in_thread
from tests.proxy.official import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Producer,
    SimpleConsumer,
)

PYTHON_CLIENT_VERSION = version_ordinal("V5_1_2")  # rocketmq-python-client 5.1.2


async def test_producer_connection_lists_the_grpc_producer(stack: Stack) -> None:
    await stack.create_topic("Conn")
    producer = Producer(ClientConfiguration(stack.endpoint, Credentials()), ("Conn",))
    await in_thread(producer.startup)
    client = RemotingClient()
    try:
        assert await in_thread(producer._init_settings_event.wait, 10)
        # 5.3: a gRPC producer's group is each topic it publishes to.
        conns = await BrokerAdmin(client).producer_connections(stack.broker.addr, "Conn")
        (conn,) = conns.connection_set
        assert conn.client_id == producer.client_id
        assert conn.language is LanguageCode.PYTHON
        assert conn.version == PYTHON_CLIENT_VERSION
        assert conn.client_addr.startswith("127.0.0.1:")
        # The proxy says how and from where the client came: its gRPC peer address, not
        # the proxy's own connection to the broker.
        assert conn.protocol == "gRPC"
        session = stack.proxy.core.sessions.get(producer.client_id)
        assert session is not None
        assert conn.client_addr == session.remote_addr
    finally:
        await client.close()
        await in_thread(producer.shutdown)


async def test_consumer_connection_lists_each_grpc_consumer_with_its_subscription(
        stack: Stack) -> None:
    await stack.create_topic("ConnC")
    config = ClientConfiguration(stack.endpoint, Credentials())
    consumers = [SimpleConsumer(config, "GrpcGroup", {"ConnC": FilterExpression("TagA")})
                 for _ in range(2)]
    client = RemotingClient()
    try:
        for consumer in consumers:
            await in_thread(consumer.startup)
            assert await in_thread(consumer._init_settings_event.wait, 10)
        conns = await BrokerAdmin(client).consumer_connections(stack.broker.addr, "GrpcGroup")
        assert {c.client_id for c in conns.connection_set} == {c.client_id for c in consumers}
        assert {c.language for c in conns.connection_set} == {LanguageCode.PYTHON}
        assert {c.protocol for c in conns.connection_set} == {"gRPC"}
        assert conns.subscription_table["ConnC"].sub_string == "TagA"
        assert conns.consume_type is not None and conns.consume_type.name == "CONSUME_ACTIVELY"
    finally:
        await client.close()
        for consumer in consumers:
            await in_thread(consumer.shutdown)
    # NotifyClientTermination on shutdown: the group is gone from the broker at once.
    assert stack.broker.state.consumers.get("GrpcGroup") is None

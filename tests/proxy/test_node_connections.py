"""Node.js clients as the brokers see them: producerConnection / consumerConnection list each."""

from __future__ import annotations

from engine.client.admin.broker import BrokerAdmin
from engine.protocol.codes import LanguageCode
from engine.remoting.client import RemotingClient
from tests.proxy.conftest import Stack
from tests.proxy.nodejs import NodeClient


async def test_producer_connection_lists_the_node_producer(stack: Stack,
                                                           node_client: NodeClient) -> None:
    await stack.create_topic("ConnN")
    client = RemotingClient()
    try:
        async with node_client.start("producer.js", endpoint=stack.endpoint, topic="ConnN",
                                     messages=[], hold=True) as scenario:
            started = await scenario.next("started")
            conns = await BrokerAdmin(client).producer_connections(stack.broker.addr, "ConnN")
            await scenario.finish()
    finally:
        await client.close()
    (conn,) = conns.connection_set
    assert conn.client_id == started["clientId"]
    assert conn.client_addr.startswith("127.0.0.1:")
    assert conn.language is LanguageCode.NODE_JS


async def test_consumer_connection_lists_the_node_push_consumer(stack: Stack,
                                                                node_client: NodeClient) -> None:
    await stack.create_topic("ConnP")
    client = RemotingClient()
    try:
        async with node_client.start("push_consumer.js", endpoint=stack.endpoint, topic="ConnP",
                                     group="NodeGroup") as scenario:
            started = await scenario.next("started")
            conns = await BrokerAdmin(client).consumer_connections(stack.broker.addr,
                                                                   "NodeGroup")
            await scenario.finish()
    finally:
        await client.close()
    (conn,) = conns.connection_set
    assert conn.client_id == started["clientId"]
    assert conn.language is LanguageCode.NODE_JS
    assert conns.subscription_table["ConnP"].sub_string == "*"
    assert conns.consume_type is not None and conns.consume_type.name == "CONSUME_PASSIVELY"
    # NotifyClientTermination on shutdown: the group is gone from the broker at once.
    assert stack.broker.state.consumers.get("NodeGroup") is None

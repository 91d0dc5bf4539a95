"""consumerStatus and consumeMessageDirectly on a Node.js push consumer: the proxy relays
them over Telemetry; the client answers the stack with "mock stack" and the verification
with NOT_IMPLEMENTED (in a VerifyMessageCommand, its bug), so both come back at once."""

from __future__ import annotations

from engine.namesrv.controller import NamesrvController
from mqadmin.operations import consumer as ops
from mqadmin.operations.messages.redeliver import consume_directly
from tests.proxy.conftest import Stack
from tests.proxy.nodejs import NodeClient
from tests.proxy.test_relay import GROUP, TOPIC, operator, stored_message


async def test_node_consumer_answers_the_stack_and_the_verification(
        stack: Stack, namesrv: NamesrvController, node_client: NodeClient) -> None:
    await stack.create_topic(TOPIC)
    async with node_client.start("push_consumer.js", endpoint=stack.endpoint, topic=TOPIC,
                                 group=GROUP) as scenario, operator(namesrv) as admin:
        started = await scenario.next("started")
        client_id = started["clientId"]
        _, info = await ops.client_status(admin, GROUP, client_id, jstack=True)
        assert info.jstack == "mock stack"
        assert info.properties["language"] == "NODE_JS"
        found = await stored_message(stack, admin)
        direct = await consume_directly(admin, GROUP, client_id, found)
        assert direct.result.consume_result is None
        assert direct.result.remark == "from gRPC client: NOT_IMPLEMENTED"
        session = stack.proxy.core.sessions.get(client_id)
        assert session is not None and len(session.pending) == 0
        await scenario.finish()

"""The official Node.js client signing with credentials: served, or refused with a wrong secret."""

from __future__ import annotations

from tests.proxy.conftest import Stack, stored
from tests.proxy.nodejs import NodeClient
from tests.proxy.test_auth import ADMIN, secured

__all__ = ["secured"]  # the fixture of the Python client's tests: a broker with ACL on


async def test_signed_producer_of_a_super_user_is_served(secured: Stack,
                                                         node_client: NodeClient) -> None:
    events = await node_client.run(
        "producer.js", endpoint=secured.endpoint, topic="Secure",
        accessKey=ADMIN[0], accessSecret=ADMIN[1], messages=[{"body": "signed"}])
    (receipt,) = [e for e in events if e["event"] == "sent"]
    record = await stored(secured, "Secure", str(receipt["messageId"]))
    assert record.body == b"signed"


async def test_a_wrong_secret_is_refused_unauthorized(secured: Stack,
                                                      node_client: NodeClient) -> None:
    async with node_client.start("producer.js", endpoint=secured.endpoint, topic="Secure",
                                 accessKey=ADMIN[0], accessSecret="not-the-secret",
                                 messages=[{"body": "refused"}],
                                 startupBackoffMs=100) as scenario:
        error = await scenario.next("error")
    # The client cannot read the route (it tries three times, 100 ms apart here rather than
    # its 1 s and 2 s), so it does not start; the proxy's answer is the innermost cause.
    assert "Startup the rocketmq client failed" in str(error["message"])
    refusal = error["causes"][-1]
    assert refusal["code"] == 40100, error
    assert "signature check failed" in refusal["message"]
    assert not [e for e in scenario.events if e["event"] in ("started", "sent")]

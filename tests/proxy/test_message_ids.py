"""A 5.x client's message id (34 hex digits, version 01) is a message id to mqadmin: the
message it names is found by it, and an unknown one says who made it."""

from __future__ import annotations

import pytest

from engine.client.admin import MQAdmin
from engine.namesrv.controller import NamesrvController
from mqadmin.exit_codes import UsageProblem
from mqadmin.operations.messages.ids import NotAMessageId, describe_v5_id, find_by_id, is_v5_id
from tests.conftest import addr_of
from tests.proxy.conftest import Stack, in_thread, stored
from tests.proxy.official import ClientConfiguration, Credentials, Message, Producer


def test_a_5x_message_id_says_who_made_it_and_when() -> None:
    msg_id = "0156F7E71C361B21BC024CCDBE00000000"  # rocketmq-clients' MessageIdCodec example
    assert is_v5_id(msg_id) and is_v5_id(msg_id.lower())
    assert not is_v5_id("00" + msg_id[2:]) and not is_v5_id(msg_id[:-1])
    assert describe_v5_id(msg_id) == ("made by a 5.x client on the host with MAC "
                                      "56:f7:e7:1c:36:1b (pid 8636) at 2022-03-23 14:50:38 UTC")


async def test_mqadmin_finds_a_message_by_the_id_the_5x_producer_got(
        stack: Stack, namesrv: NamesrvController) -> None:
    await stack.create_topic("Ids")
    producer = Producer(ClientConfiguration(stack.endpoint, Credentials()), ("Ids",))
    await in_thread(producer.startup)
    try:
        msg = Message()
        msg.topic, msg.body = "Ids", b"find me"
        msg_id = (await in_thread(producer.send, msg)).message_id
    finally:
        await in_thread(producer.shutdown)
    assert is_v5_id(msg_id)
    await stored(stack, "Ids", msg_id)  # queued, so the index has it
    async with MQAdmin(addr_of(namesrv)) as admin:
        for topic in ("Ids", None):
            (found,) = await find_by_id(admin, msg_id, topic)
            assert found.record.body == b"find me"
            assert found.record.properties()["UNIQ_KEY"] == msg_id
        missing = "01" + "0" * 31 + "1"
        with pytest.raises(NotAMessageId, match=r"a 5\.x client's message id is not one.*"
                                                r"made by a 5\.x client"):
            await find_by_id(admin, missing, "Ids")
        with pytest.raises(UsageProblem, match=r"34 \(starting 01\)"):
            await find_by_id(admin, "02" + "0" * 32)

"""SQL92 subscriptions through the real protocol (enablePropertyFilter=true)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol import fastjson
from engine.protocol.body.check_client import CheckClientRequestBody
from engine.protocol.body.heartbeat import (
    ConsumerData,
    ExpressionType,
    HeartbeatData,
    SubscriptionData,
)
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.protocol.message import decode_records
from engine.protocol.wire import to_json
from engine.remoting.client import RemotingClient

from .conftest import running_broker
from .helpers import pull_request, send_request

TOPIC = "Trades"
GROUP = "Auditors"
EXPRESSION = "(amount BETWEEN 3 AND 6 AND region = 'eu') OR vip IS NOT NULL"


@pytest.fixture
async def broker(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[BrokerController]:
    async with running_broker(tmp_path, namesrv, enable_property_filter=True) as controller:
        yield controller


async def send_trades(client: RemotingClient, broker: BrokerController) -> None:
    for i in range(10):
        extra = {"amount": str(i), "region": "eu" if i % 2 else "us"}
        if i == 8:
            extra["vip"] = "yes"
        resp = await client.invoke(broker.addr, send_request(
            TOPIC, f"trade-{i}".encode(), queue_id=0, tags=f"T{i}", extra=extra))
        assert resp.code == ResponseCode.SUCCESS


async def pulled_bodies(client: RemotingClient, broker: BrokerController,
                        **options: object) -> list[str]:
    bodies: list[str] = []
    offset = 0
    for _ in range(20):
        resp = await client.invoke(broker.addr, pull_request(TOPIC, 0, offset, group=GROUP,
                                                             **options))  # type: ignore[arg-type]
        ext = resp.ext_fields or {}
        if resp.code == ResponseCode.SUCCESS:
            bodies += [r.body.decode() for r in decode_records(resp.body or b"")]
        elif resp.code not in (ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_NOT_FOUND):
            raise AssertionError(f"{resp.code} {resp.remark}")
        offset = int(ext["nextBeginOffset"])
        if resp.code == ResponseCode.PULL_NOT_FOUND:
            break
    return bodies


async def test_sql92_subscription_receives_exactly_the_matching_messages(
        broker: BrokerController, client: RemotingClient) -> None:
    await send_trades(client, broker)
    got = await pulled_bodies(client, broker, subscription=EXPRESSION, expression_type="SQL92")
    assert got == ["trade-3", "trade-5", "trade-8"]
    # System properties count too, as on a Java broker.
    got = await pulled_bodies(client, broker, subscription="TAGS IN ('T1', 'T2')",
                              expression_type="SQL92")
    assert got == ["trade-1", "trade-2"]


async def test_sql92_subscription_from_the_heartbeat(broker: BrokerController,
                                                     client: RemotingClient) -> None:
    await send_trades(client, broker)
    sub = SubscriptionData.build(TOPIC, EXPRESSION, ExpressionType.SQL92, sub_version=1)
    data = HeartbeatData("auditor@1", frozenset(), frozenset({ConsumerData(
        GROUP, subscription_data_set=frozenset({sub}))}))
    resp = await client.invoke(broker.addr, request(RequestCode.HEART_BEAT, None,
                                                    fastjson.dumpb(to_json(data))))
    assert resp.code == ResponseCode.SUCCESS
    got = await pulled_bodies(client, broker, in_request=False)
    assert got == ["trade-3", "trade-5", "trade-8"]


@pytest.mark.parametrize("bad", ["amount >", "amount = 1 AND", "a CONTAINS 'x'", "a != 1"])
async def test_bad_expression_is_refused_with_a_useful_remark(
        broker: BrokerController, client: RemotingClient, bad: str) -> None:
    await send_trades(client, broker)
    resp = await client.invoke(broker.addr, pull_request(TOPIC, 0, 0, group=GROUP,
                                                         subscription=bad,
                                                         expression_type="SQL92"))
    assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "does not parse" in (resp.remark or "") and "column" in (resp.remark or "")
    check = CheckClientRequestBody("auditor@1", GROUP, SubscriptionData.build(
        TOPIC, bad, ExpressionType.SQL92, sub_version=1))
    resp = await client.invoke(broker.addr, request(RequestCode.CHECK_CLIENT_CONFIG, None,
                                                    fastjson.dumpb(to_json(check))))
    assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


async def test_sql92_needs_enable_property_filter(tmp_path: Path, namesrv: NamesrvController,
                                                  client: RemotingClient) -> None:
    async with running_broker(tmp_path, namesrv) as controller:
        await send_trades(client, controller)
        resp = await client.invoke(controller.addr, pull_request(
            TOPIC, 0, 0, group=GROUP, subscription="a = 1", expression_type="SQL92"))
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert "enablePropertyFilter=true" in (resp.remark or "")

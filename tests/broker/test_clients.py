"""Heartbeats, consumer membership, NOTIFY_CONSUMER_IDS_CHANGED and channel expiry."""

from __future__ import annotations

import asyncio
import json

from engine.broker.controller import BrokerController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.remoting.client import RemotingClient
from engine.remoting.router import RequestContext, Router

from .conftest import call
from .helpers import heartbeat


def notified_client() -> tuple[RemotingClient, asyncio.Queue[str]]:
    router = Router()
    seen: asyncio.Queue[str] = asyncio.Queue()

    @router.handles(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
    def on_notify(ctx: RequestContext[None], cmd: RemotingCommand) -> None:
        seen.put_nowait((cmd.ext_fields or {}).get("consumerGroup", ""))

    return RemotingClient(router, None), seen


async def consumer_ids(client: RemotingClient, addr: str, group: str) -> list[str]:
    resp = await call(client, addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                      {"consumerGroup": group})
    if resp.code != ResponseCode.SUCCESS:
        return []
    return sorted(json.loads(resp.body or b"{}")["consumerIdList"])


async def test_membership_changes_notify_every_member(broker: BrokerController,
                                                      client: RemotingClient) -> None:
    addr = broker.addr
    a, a_seen = notified_client()
    b, b_seen = notified_client()
    try:
        assert (await a.invoke(addr, heartbeat("A", consumer_group="CG", topics=("T",)))).code == 0
        assert await asyncio.wait_for(a_seen.get(), 5) == "CG"  # joining is a change
        await b.invoke(addr, heartbeat("B", consumer_group="CG", topics=("T",)))
        assert await asyncio.wait_for(a_seen.get(), 5) == "CG"
        assert await asyncio.wait_for(b_seen.get(), 5) == "CG"
        assert await consumer_ids(client, addr, "CG") == ["A", "B"]
        assert broker.state.topics.get("%RETRY%CG") is not None

        await a.invoke(addr, heartbeat("A", consumer_group="CG", topics=("T",)))
        assert a_seen.empty()  # an unchanged heartbeat is no change

        await call(b, addr, RequestCode.UNREGISTER_CLIENT,
                   {"clientID": "B", "consumerGroup": "CG"})
        assert await asyncio.wait_for(a_seen.get(), 5) == "CG"
        assert await consumer_ids(client, addr, "CG") == ["A"]

        a.close_connection(addr)
        while await consumer_ids(client, addr, "CG"):
            await asyncio.sleep(0.01)
        resp = await call(client, addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                          {"consumerGroup": "CG"})
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark == "no consumer for this group, CG"
    finally:
        await a.close()
        await b.close()


async def test_silent_clients_expire(broker: BrokerController, client: RemotingClient) -> None:
    addr = broker.addr
    await client.invoke(addr, heartbeat("P", producer_group="PG", consumer_group="CG2",
                                        topics=("T",)))
    assert broker.state.producers.members("PG")
    now = broker.state.clock() + broker.state.config.channel_expired_timeout + 1
    gone = broker.state.consumers.expire(broker.state.config.channel_expired_timeout)
    assert gone == []  # not yet silent for long enough
    broker.state.consumers.clock = lambda: now
    broker.state.producers.clock = lambda: now
    broker._expire_clients()
    assert broker.state.consumers.get("CG2") is None
    assert broker.state.producers.members("PG") == []


async def test_check_client_config(broker: BrokerController, client: RemotingClient) -> None:
    tag = {"clientId": "c", "group": "CG", "subscriptionData": {
        "topic": "T", "subString": "*", "expressionType": "TAG"}}
    resp = await call(client, broker.addr, RequestCode.CHECK_CLIENT_CONFIG, None,
                      json.dumps(tag).encode())
    assert resp.code == ResponseCode.SUCCESS
    sql = {**tag, "subscriptionData": {"topic": "T", "subString": "a > 1",
                                       "expressionType": "SQL92"}}
    resp = await call(client, broker.addr, RequestCode.CHECK_CLIENT_CONFIG, None,
                      json.dumps(sql).encode())
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "does not support consumer to filter message by SQL92" in (resp.remark or "")

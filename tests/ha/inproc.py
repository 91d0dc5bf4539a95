"""Helpers of the in-process HA tests: brokers on port 0 with fast HA timings."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from engine.broker.controller import BrokerController
from engine.ha.status import HARuntimeInfo
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.remoting.client import RemotingClient
from tests.broker.conftest import broker_configs, call

FAST_HA = {"ha_send_heartbeat_interval": 100, "ha_reconnect_interval": 50,
           "slave_sync_interval": 200}

MakeBroker = Callable[..., Awaitable[BrokerController]]


async def make_brokers(tmp_path: Path, namesrv: NamesrvController
                      ) -> AsyncIterator[MakeBroker]:
    started: list[BrokerController] = []

    async def make(store_name: str, **changes: Any) -> BrokerController:
        config, store = broker_configs(tmp_path, f"127.0.0.1:{namesrv.port}",
                                       **{**FAST_HA, **changes})
        store.store_path_root_dir = str(tmp_path / store_name)
        broker = BrokerController(config, store)
        await broker.start()
        started.append(broker)
        return broker

    yield make
    for broker in reversed(started):
        await broker.stop()


async def until(check: Callable[[], bool], timeout: float = 10) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.01)


async def ha_status(client: RemotingClient, addr: str) -> HARuntimeInfo:
    resp = await call(client, addr, RequestCode.GET_BROKER_HA_STATUS)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return HARuntimeInfo.decode(resp.body or b"")

"""A real controller on port 0: the 5.3.3 requests over TCP, elections, restarts."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine.controller.config import ControllerConfig
from engine.controller.manager import ControllerManager
from engine.protocol.body.controller import (
    BrokerReplicasInfo,
    SyncStateSet,
    encode_broker_names,
)
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.fastjson import loads
from engine.protocol.header.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
)
from engine.protocol.wire import from_ext, from_json, to_ext
from engine.remoting.client import RemotingClient


def controller_config(root: Path, **changes: Any) -> ControllerConfig:
    return ControllerConfig(
        controller_d_leger_group="g1", controller_d_leger_peers="n0-127.0.0.1:0",
        controller_d_leger_self_id="n0", controller_store_path=str(root / "ctl"),
        config_store_path=str(root / "controller.properties"), bind_address="127.0.0.1",
        logs_dir=str(root / "logs"), **changes)


def now_ms() -> int:
    return int(time.monotonic() * 1000)


@pytest.fixture
async def controller(tmp_path: Path) -> AsyncIterator[ControllerManager]:
    manager = ControllerManager(controller_config(tmp_path), clock=now_ms)
    await manager.start()
    yield manager
    await manager.stop()


async def call(client: RemotingClient, addr: str, code: int, header: Any = None,
               body: bytes | None = None) -> RemotingCommand:
    return await client.invoke(addr, request(code, to_ext(header) if header else None, body),
                               5.0)


async def join(client: RemotingClient, addr: str, broker_id: int) -> RemotingCommand:
    """What a controller-mode broker does: next id, apply it, heartbeat, register."""
    answer = await call(client, addr, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                        GetNextBrokerIdRequestHeader("c", "b"))
    assert answer.ext("nextBrokerId") == str(broker_id)
    me = f"127.0.0.1:{10_000 + broker_id}"
    answer = await call(client, addr, RequestCode.CONTROLLER_APPLY_BROKER_ID,
                        ApplyBrokerIdRequestHeader("c", "b", broker_id, f"{me};1"))
    assert answer.code == 0, answer.remark
    answer = await call(client, addr, RequestCode.BROKER_HEARTBEAT,
                        BrokerHeartbeatRequestHeader("c", me, "b", broker_id, 0, 0, 0, 60_000))
    assert answer.code == 0
    return await call(client, addr, RequestCode.CONTROLLER_REGISTER_BROKER,
                      RegisterBrokerToControllerRequestHeader("c", "b", broker_id, me))


@contextlib.asynccontextmanager
async def restarted(root: Path) -> AsyncIterator[tuple[str, RemotingClient]]:
    """A controller started again on the store under `root`: its address and a client."""
    again = ControllerManager(controller_config(root), clock=now_ms)
    await again.start()
    client = RemotingClient()
    try:
        yield again.address, client
    finally:
        await client.close()
        await again.stop()


async def master_and_epoch(client: RemotingClient, addr: str) -> tuple[str | None, str | None]:
    answer = await call(client, addr, RequestCode.CONTROLLER_GET_REPLICA_INFO,
                        GetReplicaInfoRequestHeader("b"))
    return answer.ext("masterBrokerId"), answer.ext("masterEpoch")


async def test_metadata_names_this_controller_leader(controller: ControllerManager) -> None:
    client = RemotingClient()
    try:
        answer = await call(client, controller.address, RequestCode.CONTROLLER_GET_METADATA_INFO)
        meta = from_ext(GetMetaDataResponseHeader, answer.ext_fields)
        assert meta == GetMetaDataResponseHeader("g1", "n0", controller.address, True,
                                                 f"n0:{controller.address};")
    finally:
        await client.close()


async def test_a_broker_set_registers_elects_and_fails_over(
        controller: ControllerManager) -> None:
    addr = controller.address
    b1, b2, admin = RemotingClient(), RemotingClient(), RemotingClient()
    elected = asyncio.Event()
    controller.election_listeners.append(lambda _name: elected.set())
    try:
        first = await join(b1, addr, 1)
        assert first.code == 0 and first.ext("masterBrokerId") is None
        answer = await call(b1, addr, RequestCode.CONTROLLER_ELECT_MASTER,
                            ElectMasterRequestHeader("c", "b", 1))
        assert (answer.code, answer.ext("masterBrokerId"), answer.ext("masterEpoch")) == (
            0, "1", "1")
        second = await join(b2, addr, 2)
        assert second.ext("masterAddress") == "127.0.0.1:10001"
        answer = await call(b1, addr, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                            AlterSyncStateSetRequestHeader("b", 1, 1),
                            SyncStateSet(frozenset({1, 2}), 1).encode())
        assert (answer.code, answer.ext("newSyncStateSetEpoch")) == (0, "2")
        elected.clear()
        await b1.close()  # the master's process dies: its connection closes
        await asyncio.wait_for(elected.wait(), 10)
        answer = await call(admin, addr, RequestCode.CONTROLLER_GET_REPLICA_INFO,
                            GetReplicaInfoRequestHeader("b"))
        assert from_ext(GetReplicaInfoResponseHeader, answer.ext_fields) == (
            GetReplicaInfoResponseHeader(2, "127.0.0.1:10002", 2))
        assert SyncStateSet.decode(answer.body, "x", "answer") == SyncStateSet(
            frozenset({2}), 3)
        answer = await call(admin, addr, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                            body=encode_broker_names(["b"]))
        info = from_json(BrokerReplicasInfo, loads(answer.body)).replicas_info_table["b"]
        assert [(r.broker_id, r.alive) for r in info.not_in_sync_replicas] == [(1, False)]
    finally:
        for client in (b1, b2, admin):
            await client.close()


async def test_state_survives_a_restart(tmp_path: Path) -> None:
    first = ControllerManager(controller_config(tmp_path), clock=now_ms)
    await first.start()
    client = RemotingClient()
    try:
        await join(client, first.address, 1)
        await call(client, first.address, RequestCode.CONTROLLER_ELECT_MASTER,
                   ElectMasterRequestHeader("c", "b", 1))
    finally:
        await client.close()
        await first.stop()
    async with restarted(tmp_path) as (addr, client):
        assert await master_and_epoch(client, addr) == ("1", "1")
        answer = await call(client, addr, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                            GetNextBrokerIdRequestHeader("c", "b"))
        assert answer.ext("nextBrokerId") == "2"


async def test_config_reads_and_updates_but_not_the_black_list(
        controller: ControllerManager) -> None:
    client = RemotingClient()
    try:
        addr = controller.address
        answer = await call(client, addr, RequestCode.GET_CONTROLLER_CONFIG)
        assert b"enableElectUncleanMaster=false" in answer.body
        answer = await call(client, addr, RequestCode.UPDATE_CONTROLLER_CONFIG,
                            body=b"enableElectUncleanMaster=true\n")
        assert answer.code == 0 and controller.config.enable_elect_unclean_master
        answer = await call(client, addr, RequestCode.UPDATE_CONTROLLER_CONFIG,
                            body=b"configStorePath=/x\n")
        assert answer.code == ResponseCode.NO_PERMISSION
    finally:
        await client.close()


async def test_heartbeat_without_an_id_is_refused(controller: ControllerManager) -> None:
    client = RemotingClient()
    try:
        answer = await call(client, controller.address, RequestCode.BROKER_HEARTBEAT,
                            BrokerHeartbeatRequestHeader("c", "h:1", "b"))
        assert answer.code == ResponseCode.CONTROLLER_INVALID_REQUEST
    finally:
        await client.close()


async def test_a_stopping_controller_elects_nobody(tmp_path: Path) -> None:
    """Its own shutdown closes the brokers' connections: that is not their death.  A leader
    that took it for one re-elected healthy masters at every controller restart."""
    first = ControllerManager(controller_config(tmp_path), clock=now_ms)
    await first.start()
    b1, b2 = RemotingClient(), RemotingClient()
    try:
        await join(b1, first.address, 1)
        await call(b1, first.address, RequestCode.CONTROLLER_ELECT_MASTER,
                   ElectMasterRequestHeader("c", "b", 1))
        await join(b2, first.address, 2)
        answer = await call(b1, first.address, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                            AlterSyncStateSetRequestHeader("b", 1, 1),
                            SyncStateSet(frozenset({1, 2}), 1).encode())
        assert answer.code == 0, answer.remark
        await first.stop()  # both brokers still connected
    finally:
        for client in (b1, b2):
            await client.close()
    async with restarted(tmp_path) as (addr, client):
        assert await master_and_epoch(client, addr) == ("1", "1")

"""Three controllers replicating through Raft (pysyncobj): one leader answers, followers
answer CONTROLLER_NOT_LEADER, a new leader keeps the state, and all of it survives a restart
of every controller."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

from engine.controller.config import ControllerConfig
from engine.controller.manager import ControllerManager
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.protocol.header.controller import (
    ApplyBrokerIdRequestHeader,
    GetNextBrokerIdRequestHeader,
)
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient


def free_pair() -> int:
    """A port p with p and p+1 free (remoting and Raft)."""
    while True:
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return port


def configs(root: Path) -> list[ControllerConfig]:
    ports = [free_pair() for _ in range(3)]
    peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
    return [ControllerConfig(controller_d_leger_group="g", controller_d_leger_peers=peers,
                             controller_d_leger_self_id=f"n{i}", bind_address="127.0.0.1",
                             controller_store_path=str(root / f"n{i}"))
            for i in range(3)]


def now_ms() -> int:
    return int(time.monotonic() * 1000)


async def leader_of(managers: list[ControllerManager]) -> ControllerManager:
    while True:  # pysyncobj elects within its 0.4-1.4 s election timeout
        leaders = [m for m in managers if m.replication.is_leader]
        if leaders:
            return leaders[0]
        await asyncio.sleep(0.05)


async def next_id(client: RemotingClient, manager: ControllerManager) -> tuple[int, str | None]:
    answer = await client.invoke(manager.address, request(
        RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
        to_ext(GetNextBrokerIdRequestHeader("c", "b"))), 5.0)
    return answer.code, answer.ext("nextBrokerId")


async def test_three_controllers_replicate_fail_over_and_restart(tmp_path: Path) -> None:
    cfgs = configs(tmp_path)
    managers = [ControllerManager(c, clock=now_ms) for c in cfgs]
    client = RemotingClient()
    try:
        for m in managers:
            await m.start()
        leader = await asyncio.wait_for(leader_of(managers), 30)
        answer = await client.invoke(leader.address, request(
            RequestCode.CONTROLLER_APPLY_BROKER_ID,
            to_ext(ApplyBrokerIdRequestHeader("c", "b", 1, "h:1;1"))), 10.0)
        assert answer.code == 0, answer.remark
        follower = next(m for m in managers if m is not leader)
        assert (await next_id(client, follower))[0] == ResponseCode.CONTROLLER_NOT_LEADER
        meta = await client.invoke(follower.address, request(
            RequestCode.CONTROLLER_GET_METADATA_INFO), 5.0)
        assert meta.ext("controllerLeaderAddress") == leader.address
        assert meta.ext("isLeader") == "false"

        await leader.stop()  # the leader goes away: the two others elect one of them
        rest = [m for m in managers if m is not leader]
        new_leader = await asyncio.wait_for(leader_of(rest), 30)
        # it answers as leader only once it has applied the old leader's entries too
        assert await next_id(client, new_leader) == (0, "2")
    finally:
        await client.close()
        for m in managers:
            await m.stop()

    managers = [ControllerManager(c, clock=now_ms) for c in cfgs]
    client = RemotingClient()
    try:
        for m in managers:
            await m.start()
        leader = await asyncio.wait_for(leader_of(managers), 30)
        assert await next_id(client, leader) == (0, "2")  # the whole log applied first
    finally:
        await client.close()
        for m in managers:
            await m.stop()

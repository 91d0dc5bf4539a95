"""Three `mqcontroller` processes and a set of three brokers under them: kill -9 of the
leader controller together with the master broker (the broker election happens while the
controllers elect their own leader), and kill -9 of a follower controller together with the
master; each time a new master is elected by the controllers left and serves sends."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from engine.common import properties
from engine.namesrv.controller import NamesrvController
from engine.protocol import fastjson
from engine.protocol.body.controller import BrokerReplicasInfo, ReplicasInfo, encode_broker_names
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.protocol.wire import from_json
from engine.remoting.client import RemotingClient
from engine.remoting.errors import RemotingError
from tests.broker.helpers import send_request
from tests.controller.test_failover import NAME, QUEUES, TOPIC, bodies_on, start_three
from tests.controller.test_raft import free_pair
from tests.ha.procs import ROOT, BrokerProcess
from tests.ha.traffic import Producer, create_topic

READY = "The ControllerManager boot success."


class ControllerProcess:
    """One `mqcontroller -c` process of a three-peer group."""

    def __init__(self, root: Path, self_id: str, peers: str, addr: str) -> None:
        self.dir = root / self_id
        self.dir.mkdir(parents=True)
        self.addr = addr
        self.conf = self.dir / "controller.conf"
        self.conf.write_text(properties.dumps([
            ("controllerDLegerGroup", "g"), ("controllerDLegerPeers", peers),
            ("controllerDLegerSelfId", self_id), ("bindAddress", "127.0.0.1"),
            ("controllerStorePath", str(self.dir / "store")),
            ("scanNotActiveBrokerInterval", "200"), ("scanInactiveMasterInterval", "200"),
            ("logsDir", str(self.dir / "logs"))]))
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        with open(self.dir / "output.txt", "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "engine.controller.main", "-c", str(self.conf)],
                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                env={**os.environ, "HOME": str(self.dir)})
        async with asyncio.timeout(60):
            while READY not in (self.dir / "output.txt").read_text():
                assert self.proc.poll() is None, (self.dir / "output.txt").read_text()
                await asyncio.sleep(0.05)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)


def group(tmp_path: Path) -> list[ControllerProcess]:
    addrs = [f"127.0.0.1:{free_pair()}" for _ in range(3)]
    peers = ";".join(f"n{i}-{a}" for i, a in enumerate(addrs))
    return [ControllerProcess(tmp_path / "controllers", f"n{i}", peers, a)
            for i, a in enumerate(addrs)]


async def leader(client: RemotingClient, controllers: list[ControllerProcess]) -> str:
    """The address of the controller that says it leads (waits for an election)."""
    async with asyncio.timeout(60):
        while True:
            for c in controllers:
                try:
                    answer = await client.invoke(c.addr, request(
                        RequestCode.CONTROLLER_GET_METADATA_INFO), 3)
                except (RemotingError, OSError):
                    continue
                if answer.ext("isLeader") == "true":
                    return c.addr
            await asyncio.sleep(0.05)


async def replicas(client: RemotingClient, controllers: list[ControllerProcess]) -> ReplicasInfo:
    """The set's replica info, from whichever controller leads now."""
    async with asyncio.timeout(60):
        while True:
            addr = await leader(client, controllers)
            try:
                answer = await client.invoke(addr, request(
                    RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                    body=encode_broker_names([NAME])), 3)
            except (RemotingError, OSError):
                continue
            if answer.code == ResponseCode.SUCCESS:
                info = from_json(BrokerReplicasInfo, fastjson.loads(answer.body or b"{}"))
                found = info.replicas_info_table.get(NAME)
                if found is not None:
                    return found
            await asyncio.sleep(0.05)


async def until_replicas(client: RemotingClient, controllers: list[ControllerProcess],
                         check: object) -> ReplicasInfo:
    async with asyncio.timeout(60):
        while not check(info := await replicas(client, controllers)):  # type: ignore[operator]
            await asyncio.sleep(0.05)
    return info


def all_in_sync(info: ReplicasInfo) -> bool:
    return info.master_address is not None and len(
        [r for r in info.in_sync_replicas if r.alive]) == 3


async def kill_master_and_a_controller(tmp_path: Path, namesrv: NamesrvController,
                                       brokers: list[BrokerProcess], *, the_leader: bool) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    controllers = group(tmp_path)
    client = RemotingClient()
    try:
        await asyncio.gather(*(c.start() for c in controllers))
        await start_three(tmp_path, ns, ";".join(c.addr for c in controllers), brokers)
        before = await until_replicas(client, controllers, all_in_sync)
        by_addr = {b.addr: b for b in brokers}
        old = by_addr[before.master_address or ""]
        await create_topic(client, ns, old.addr, TOPIC, QUEUES)
        producer = Producer(client, ns, TOPIC, QUEUES)
        stop = asyncio.Event()
        running = asyncio.create_task(producer.run(stop, pause=0))
        async with asyncio.timeout(30):
            while len(producer.acked) < 100:
                await asyncio.sleep(0.02)
        lead = await leader(client, controllers)
        victim = next(c for c in controllers if (c.addr == lead) == the_leader)
        victim.kill()  # kill -9 of a controller and the master broker together
        old.kill()
        rest = [c for c in controllers if c is not victim]
        after = await until_replicas(client, rest, lambda i: i.master_address not in (
            None, old.addr))
        assert after.master_epoch == before.master_epoch + 1
        new = by_addr[after.master_address or ""]
        acked_before = len(producer.acked)
        async with asyncio.timeout(60):  # the producer follows the route to the new master
            while not (new.addr in producer.sent_to and len(producer.acked) > acked_before + 50):
                await asyncio.sleep(0.02)
        stop.set()
        await running
        assert set(producer.acked) <= await bodies_on(client, ns, new.addr)
        answer = await client.invoke(new.addr, send_request(TOPIC, b"after"), timeout=5)
        assert answer.code == ResponseCode.SUCCESS
    finally:
        await client.close()
        for c in controllers:
            c.kill()


async def test_kill_the_leader_controller_and_the_master_together(
        tmp_path: Path, namesrv: NamesrvController, brokers: list[BrokerProcess]) -> None:
    await kill_master_and_a_controller(tmp_path, namesrv, brokers, the_leader=True)


async def test_kill_a_follower_controller_and_the_master_together(
        tmp_path: Path, namesrv: NamesrvController, brokers: list[BrokerProcess]) -> None:
    await kill_master_and_a_controller(tmp_path, namesrv, brokers, the_leader=False)

"""Interop with Apache 5.3.3 (opt-in: APACHE_RMQ5_HOME), both ways: our brokers under
Apache's controller, and Apache's brokers under ours; each set of three registers, elects, and
fails over when its master is killed; our mqadmin reads Apache's controller."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import ResponseCode
from engine.remoting.client import RemotingClient
from tests.apache5 import HOME, needs_apache5
from tests.broker.helpers import send_request
from tests.controller.test_failover import CONTROLLER_MODE, NAME, QUEUES, TOPIC
from tests.ha.procs import BrokerProcess
from tests.ha.traffic import create_topic
from tests.mqadmin.cli import invoke, rows_of
from tests.ports import free_port

pytestmark = needs_apache5


@pytest.fixture
async def apache_controller(tmp_path: Path) -> AsyncIterator[str]:
    addr = f"127.0.0.1:{free_port()}"
    root = tmp_path / "apache-controller"
    root.mkdir()
    conf = root / "controller.conf"
    conf.write_text(f"controllerDLegerGroup=group1\ncontrollerDLegerPeers=n0-{addr}\n"
                    f"controllerDLegerSelfId=n0\ncontrollerStorePath={root / 'store'}\n"
                    "scanNotActiveBrokerInterval=1000\n")
    script = ('. "$R5/env.sh"; exec $JAVA -Xmx256m $RMQ_COMMON_OPTS $RMQ_LOG_CONTROLLER '
              f'-Duser.home={root} -cp "$RMQ_CP" '
              f'org.apache.rocketmq.controller.ControllerStartup -c {conf}')
    with open(root / "out.txt", "wb") as out:
        proc = subprocess.Popen(["bash", "-c", script], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "R5": HOME})
    try:
        async with asyncio.timeout(120):
            while "boot success" not in (root / "out.txt").read_text():
                assert proc.poll() is None, (root / "out.txt").read_text()
                await asyncio.sleep(0.2)
        yield addr
    finally:
        proc.kill()
        proc.wait(30)


def sync_rows(addr: str) -> list[dict[str, object]]:
    return rows_of(invoke("getSyncStateSet", "-a", addr, "-b", NAME, "-o", "json"))


async def until_rows(addr: str, check: object, timeout: float = 60) -> list[dict[str, object]]:
    async with asyncio.timeout(timeout):
        while True:
            result = await asyncio.to_thread(invoke, "getSyncStateSet", "-a", addr, "-b", NAME,
                                             "-o", "json")
            if result.exit_code == 0:
                rows = rows_of(result)
                if check(rows):  # type: ignore[operator]
                    return rows
            await asyncio.sleep(0.3)


async def test_our_brokers_fail_over_under_apache_controller(
        tmp_path: Path, namesrv: NamesrvController, apache_controller: str,
        brokers: list[BrokerProcess]) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    settings = {**CONTROLLER_MODE, "controllerAddr": apache_controller}
    made = []
    for store in ("a", "b", "c"):
        broker = BrokerProcess(tmp_path, store, ns, **settings)
        brokers.append(broker)
        made.append(broker)
        await broker.start()
    rows = await until_rows(apache_controller, lambda rs: len(
        [r for r in rs if r["inSync"]]) == 3)
    master_id = rows[0]["masterBrokerId"]
    by_addr = {b.addr: b for b in made}
    master = by_addr[str(rows[0]["masterAddr"])]
    client = RemotingClient()
    try:
        await create_topic(client, ns, master.addr, TOPIC, QUEUES)
        assert (await client.invoke(master.addr, send_request(TOPIC, b"x"), timeout=5)).code \
            == ResponseCode.SUCCESS
        master.kill()
        rows = await until_rows(apache_controller, lambda rs: rs[0]["masterBrokerId"]
                                not in (None, master_id))
        assert rows[0]["masterEpoch"] == 2
        new_master = by_addr[str(rows[0]["masterAddr"])]
        async with asyncio.timeout(30):
            while (await client.invoke(new_master.addr, send_request(TOPIC, b"y"),
                                       timeout=5)).code != ResponseCode.SUCCESS:
                await asyncio.sleep(0.1)
    finally:
        await client.close()


class ApacheBroker:
    """An Apache 5.3.3 broker in controller mode, as a process (mqbroker.sh execs java)."""

    def __init__(self, root: Path, name: str, ns: str, controller: str) -> None:
        self.dir = root / name
        (self.dir / "home").mkdir(parents=True)
        self.port = free_port()
        self.conf = self.dir / "broker.conf"
        self.conf.write_text("\n".join([
            "brokerClusterName=ApCluster", "brokerName=ap-a", f"listenPort={self.port}",
            "brokerIP1=127.0.0.1", f"namesrvAddr={ns}",
            f"storePathRootDir={self.dir / 'store'}",
            f"storePathCommitLog={self.dir / 'store' / 'commitlog'}",
            "enableControllerMode=true", f"controllerAddr={controller}",
            "brokerRole=SYNC_MASTER", ""]))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.dir / "out.txt", "ab") as out:
            self.proc = subprocess.Popen(
                [str(Path(HOME, "mqbroker.sh")), "-c", str(self.conf)], stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "JAVA_OPT_EXT": f"-Duser.home={self.dir / 'home'}",
                     "RMQ_HEAP": "-Xms256m -Xmx384m"})

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


async def test_apache_brokers_fail_over_under_our_controller(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    from engine.controller.manager import ControllerManager
    from tests.controller.test_server import controller_config, now_ms

    ns = f"127.0.0.1:{namesrv.port}"
    manager = ControllerManager(controller_config(
        tmp_path, scan_not_active_broker_interval=500, scan_inactive_master_interval=500),
        clock=now_ms)
    await manager.start()
    brokers = [ApacheBroker(tmp_path, f"ap{i}", ns, manager.address) for i in (1, 2, 3)]
    try:
        for broker in brokers:
            broker.start()

        def sync_state() -> tuple[int | None, int, frozenset[int]]:
            found = manager.state.sets.get("ap-a")
            return ((found.master_id, found.master_epoch, found.sync_state_set) if found
                    else (None, 0, frozenset()))

        async with asyncio.timeout(180):
            while len(sync_state()[2]) < 3:  # the master grew its SyncStateSet: all in sync
                await asyncio.sleep(0.5)
        first, epoch, _ = sync_state()
        assert first is not None and epoch == 1
        found = manager.state.sets["ap-a"]
        old = next(b for b in brokers if b.addr == found.address(first))
        old.kill()
        async with asyncio.timeout(60):
            while sync_state()[0] in (None, first):
                await asyncio.sleep(0.2)
        new_id, epoch, _ = sync_state()
        assert epoch == 2
        rows = await asyncio.to_thread(invoke, "clusterList", "-n", ns, "-o", "json")
        listed = {r["brokerId"]: r["addr"] for r in rows_of(rows)}
        assert listed[0] == manager.state.sets["ap-a"].address(new_id)  # the route moved
        old.start()  # the old master comes back: a slave of the new one, in sync again
        async with asyncio.timeout(180):
            while first not in sync_state()[2] or sync_state()[0] != new_id:
                await asyncio.sleep(0.5)
    finally:
        for broker in brokers:
            broker.kill()
        await manager.stop()

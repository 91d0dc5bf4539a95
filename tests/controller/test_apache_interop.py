"""Our brokers under Apache 5.3.3's controller (opt-in: APACHE_RMQ5_HOME): a set of three
registers, elects, and fails over when its master is killed; our mqadmin reads Apache's
controller."""

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

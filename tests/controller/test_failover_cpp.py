"""The Apache C++ client (4.x remoting) under a controller-mode failover: it finds the new
master through the route it polls, and every send it saw acknowledged is on the new master."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from engine.controller.manager import ControllerManager
from engine.namesrv.controller import NamesrvController
from engine.remoting.client import RemotingClient
from tests.compat.test_cpp_broker import DRIVER
from tests.compat.test_cpp_namesrv import pytestmark as cpp_available
from tests.controller.test_failover import (
    QUEUES,
    TOPIC,
    bodies_on,
    master_of,
    three_brokers,
)
from tests.ha.procs import BrokerProcess
from tests.ha.traffic import create_topic, wait_topic_on

pytestmark = cpp_available
COUNT = 400


async def test_cpp_producer_keeps_every_acknowledged_send_through_a_failover(
        tmp_path: Path, namesrv: NamesrvController, controller: ControllerManager,
        brokers: list[BrokerProcess]) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    by_id = await three_brokers(tmp_path, ns, controller, brokers)
    client = RemotingClient()
    home = tmp_path / "cpp-home"
    home.mkdir()
    try:
        await create_topic(client, ns, by_id[1].addr, TOPIC, QUEUES)
        for broker in (by_id[2], by_id[3]):
            await wait_topic_on(client, broker.addr, TOPIC)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(DRIVER), "produce-try", ns, TOPIC, str(COUNT),
            env={**os.environ, "HOME": str(home)}, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL)
        assert proc.stdout is not None
        acked: set[bytes] = set()
        killed = False
        try:
            async with asyncio.timeout(240):
                while line := await proc.stdout.readline():
                    record = json.loads(line)
                    if record.get("status") == 0:  # SendStatus.OK
                        acked.add(f"cpp-try-{record['sent']}".encode())
                    if len(acked) >= 100 and not killed:
                        by_id[1].kill()  # SIGKILL while the C++ client sends
                        killed = True
                await proc.wait()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert killed and proc.returncode == 0
        new_id, epoch = master_of(controller)
        assert new_id in (2, 3) and epoch == 2
        assert len(acked) > 100  # it went on sending to the new master
        assert acked <= await bodies_on(client, ns, by_id[new_id].addr)
    finally:
        await client.close()

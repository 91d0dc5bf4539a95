"""Apache 5.3.3's mqadmin controller commands read our controller (opt-in: APACHE_RMQ5_HOME)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.controller.manager import ControllerManager
from engine.protocol.body.controller import SyncStateSet
from engine.protocol.codes import RequestCode
from engine.protocol.header.controller import (
    AlterSyncStateSetRequestHeader,
    ElectMasterRequestHeader,
)
from engine.remoting.client import RemotingClient
from tests.apache5 import HOME, needs_apache5
from tests.controller.test_server import call, controller_config, join, now_ms

pytestmark = needs_apache5


@pytest.fixture
async def controller(tmp_path: Path) -> AsyncIterator[ControllerManager]:
    manager = ControllerManager(controller_config(tmp_path), clock=now_ms)
    await manager.start()
    yield manager
    await manager.stop()


async def mqadmin(tmp_path: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(Path(HOME, "mqadmin.sh")), *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "JAVA_OPT_EXT": f"-Duser.home={tmp_path}"})
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, out.decode()
    return out.decode()


async def test_apache_mqadmin_reads_our_controller(controller: ControllerManager,
                                                   tmp_path: Path) -> None:
    addr = controller.address
    b1, b2 = RemotingClient(), RemotingClient()
    try:
        await join(b1, addr, 1)
        await call(b1, addr, RequestCode.CONTROLLER_ELECT_MASTER,
                   ElectMasterRequestHeader("c", "b", 1))
        await join(b2, addr, 2)
        await call(b1, addr, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                   AlterSyncStateSetRequestHeader("b", 1, 1),
                   SyncStateSet(frozenset({1, 2}), 1).encode())
        meta = await mqadmin(tmp_path, "getControllerMetaData", "-a", addr)
        assert f"#ControllerLeaderAddress\t{addr}" in meta
        sync = await mqadmin(tmp_path, "getSyncStateSet", "-a", addr, "-b", "b")
        assert "#MasterBrokerId\t1" in sync and "#SyncStateSetNums\t2" in sync
        assert "brokerId=2, brokerAddress='127.0.0.1:10002', alive=true" in sync
        config = await mqadmin(tmp_path, "getControllerConfig", "-a", addr)
        assert "enableElectUncleanMaster" in config
    finally:
        await b1.close()
        await b2.close()

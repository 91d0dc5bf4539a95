"""mqadmin's controller commands against a live controller: Apache's names and flags, JSON
rows, exit codes, the changes verified and audited."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.controller.manager import ControllerManager
from engine.protocol.body.controller import SyncStateSet
from engine.protocol.codes import RequestCode
from engine.protocol.header.controller import (
    AlterSyncStateSetRequestHeader,
    ElectMasterRequestHeader,
)
from engine.remoting.client import RemotingClient
from mqadmin import history
from mqadmin.exit_codes import ExitCode
from tests.conftest import closed_port_addr
from tests.controller.test_server import call, controller_config, join, now_ms
from tests.mqadmin.cli import invoke, rows_of


class BackgroundController:
    """A controller and two live brokers of set `b` (ids 1 and 2, SyncStateSet {1, 2}) on a
    private event loop thread, so the CLI can run its own loop."""

    def __init__(self, root: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.manager = ControllerManager(controller_config(root), clock=now_ms)
        self.brokers = [RemotingClient(), RemotingClient()]
        self.run(self._start())

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    async def _start(self) -> None:
        await self.manager.start()
        addr = self.manager.address
        await join(self.brokers[0], addr, 1)
        await call(self.brokers[0], addr, RequestCode.CONTROLLER_ELECT_MASTER,
                   ElectMasterRequestHeader("c", "b", 1))
        await join(self.brokers[1], addr, 2)
        await call(self.brokers[0], addr, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                   AlterSyncStateSetRequestHeader("b", 1, 1),
                   SyncStateSet(frozenset({1, 2}), 1).encode())

    async def _stop(self) -> None:
        for client in self.brokers:
            await client.close()
        await self.manager.stop()

    def close(self) -> None:
        self.run(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def ctl(tmp_path: Path) -> Iterator[BackgroundController]:
    background = BackgroundController(tmp_path)
    yield background
    background.close()


def test_reads_name_the_leader_and_the_sync_state_set(ctl: BackgroundController) -> None:
    addr = ctl.manager.address
    [meta] = rows_of(invoke("getControllerMetaData", "-a", addr, "-o", "json"))
    assert (meta["leaderId"], meta["leaderAddress"], meta["peer"]) == ("n0", addr, f"n0:{addr}")
    rows = rows_of(invoke("getSyncStateSet", "-a", addr, "-b", "b", "-o", "json"))
    assert [(r["brokerId"], r["inSync"], r["alive"], r["masterBrokerId"]) for r in rows] == [
        (1, True, True, 1), (2, True, True, 1)]
    assert rows[0]["syncStateSetNums"] == 2 and rows[0]["masterEpoch"] == 1


def test_elect_master_moves_the_master_and_is_verified(ctl: BackgroundController) -> None:
    addr = ctl.manager.address
    result = invoke("electMaster", "-a", addr, "-b", "2", "-bn", "b", "-c", "c", "--yes",
                    "-o", "json")
    rows = rows_of(result)
    assert {r["masterBrokerId"] for r in rows} == {2} and rows[0]["masterEpoch"] == 2
    assert "electMaster plan" in result.stderr
    assert ctl.manager.state.sets["b"].master_id == 2
    refused = invoke("electMaster", "-a", addr, "-b", "7", "-bn", "b", "-c", "c", "--yes")
    assert refused.exit_code == ExitCode.REJECTED
    assert "CONTROLLER_ELECT_MASTER_FAILED" in refused.stderr
    unknown = invoke("electMaster", "-a", addr, "-b", "1", "-bn", "x", "-c", "c", "--yes")
    assert unknown.exit_code == ExitCode.NOT_FOUND
    again = invoke("electMaster", "-a", addr, "-b", "2", "-bn", "b", "-c", "c", "--yes")
    assert again.exit_code == 0 and "the master already" in again.stderr
    # the change runner's one record for each applied change, none for the unknown set
    # nor for the one with nothing to do; where it went: the controller
    elected, refused_record = history.records(detail=True)
    assert (elected["command"], elected["target"], elected["outcome"]) == (
        "electMaster", "b", "applied")
    assert elected["namesrv"] == addr and elected["args"]["broker_id"] == 2
    assert elected["plan"] == [{"brokerName": "b", "masterBrokerId": 1,
                                "newMasterBrokerId": 2}]
    assert (refused_record["outcome"], refused_record["exitCode"]) == (
        "failed", ExitCode.REJECTED)


def test_changes_need_yes_without_a_terminal(ctl: BackgroundController) -> None:
    result = invoke("electMaster", "-a", ctl.manager.address, "-b", "2", "-bn", "b", "-c", "c")
    assert result.exit_code == ExitCode.USAGE and "--yes" in result.stderr
    dry = invoke("electMaster", "-a", ctl.manager.address, "-b", "2", "-bn", "b", "-c", "c",
                 "--dry-run", "-o", "json")
    assert dry.exit_code == 0 and "dry run, nothing was changed" in dry.stderr
    assert rows_of(dry) == [{"brokerName": "b", "masterBrokerId": 1, "newMasterBrokerId": 2}]
    assert ctl.manager.state.sets["b"].master_id == 1
    assert history.records() == []


def test_config_reads_updates_and_refuses_its_black_list(ctl: BackgroundController) -> None:
    addr = ctl.manager.address
    rows = rows_of(invoke("getControllerConfig", "-a", addr, "-o", "json"))
    assert {"controller": addr, "key": "enableElectUncleanMaster", "value": "false"} in rows
    rows = rows_of(invoke("updateControllerConfig", "-a", addr, "-k",
                          "enableElectUncleanMaster", "-v", "true", "--yes", "-o", "json"))
    assert rows == [{"controller": addr, "key": "enableElectUncleanMaster", "value": "true"}]
    refused = invoke("updateControllerConfig", "-a", addr, "-k", "configStorePath", "-v", "/x",
                     "--yes")
    assert refused.exit_code == ExitCode.REJECTED and "NO_PERMISSION" in refused.stderr
    same = invoke("updateControllerConfig", "-a", addr, "-k", "enableElectUncleanMaster",
                  "-v", "true", "--yes")
    assert same.exit_code == 0 and "on every controller already" in same.stderr
    assert [(r["command"], r["outcome"]) for r in history.records()] == [
        ("updateControllerConfig", "applied"), ("updateControllerConfig", "failed")]


def test_clean_forgets_a_living_broker_only_with_l(ctl: BackgroundController) -> None:
    addr = ctl.manager.address
    refused = invoke("cleanBrokerMetadata", "-a", addr, "-bn", "b", "-b", "2", "--yes")
    assert refused.exit_code == ExitCode.REJECTED
    rows = rows_of(invoke("cleanBrokerMetadata", "-a", addr, "-bn", "b", "-b", "2", "-l",
                          "--yes", "-o", "json"))
    assert [(r["brokerId"], r["cleaned"]) for r in rows] == [(2, True)]
    assert 2 not in ctl.manager.state.sets["b"].members
    assert [(r["command"], r["target"], r["outcome"]) for r in history.records()] == [
        ("cleanBrokerMetadata", "b", "failed"), ("cleanBrokerMetadata", "b", "applied")]


def test_an_unreachable_controller_is_exit_5() -> None:
    result = invoke("getControllerMetaData", "-a", closed_port_addr())
    assert result.exit_code == ExitCode.UNREACHABLE and "did not answer" in result.stderr
    assert invoke("getSyncStateSet", "-a", closed_port_addr()).exit_code == ExitCode.USAGE


def test_dev_up_controller_runs_a_set_of_three_under_its_controller(tmp_path: Path) -> None:
    from mqadmin.dev import cluster as dev

    data_dir = tmp_path / "dev"
    try:
        up = invoke("dev", "up", "--controller", "--open", "--no-traffic", "--data-dir",
                    str(data_dir), "-o", "json")
        assert up.exit_code == 0, up.stderr
        processes = {r["process"]: r for r in rows_of(up)}
        assert {"namesrv", "broker-a-n1", "broker-a-n2", "broker-a-n3"} <= set(processes)
        assert processes["broker-a-n1"]["brokerId"] == 0
        state = dev.read_state(data_dir)
        assert state is not None and state.controller in up.stderr
        rows = rows_of(invoke("getSyncStateSet", "-a", state.controller, "-b", "broker-a",
                              "-o", "json"))
        assert rows[0]["masterAddr"] == processes["broker-a-n1"]["addr"]
        assert {r["brokerAddr"] for r in rows} == {
            processes[n]["addr"] for n in ("broker-a-n1", "broker-a-n2", "broker-a-n3")}
        again = invoke("dev", "up", "--data-dir", str(data_dir))
        assert again.exit_code == ExitCode.USAGE and "dev down" in again.stderr
    finally:
        dev.down(data_dir, timeout=5)

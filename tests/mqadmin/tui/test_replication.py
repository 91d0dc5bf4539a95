"""The switchover wizard against an in-process master and slave: plan, confirm, the live
timeline, verification; and back again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from engine.broker.controller import BrokerController
from engine.store.config import BrokerRole
from mqadmin import history
from mqadmin.tui.screens.change import ChangeScreen
from mqadmin.tui.screens.replication import ReplicationScreen
from tests.broker.conftest import broker_configs
from tests.ha.inproc import FAST_HA
from tests.mqadmin.conftest import BackgroundCluster
from tests.mqadmin.tui.pilot import SIZE, dashboard, loaded, table, until
from tests.mqadmin.tui.test_changes import finish


class PairCluster(BackgroundCluster):
    """broker-a as a master and a slave, with fast HA timings."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, **FAST_HA)
        self.slave: BrokerController | None = None

    async def _start(self) -> None:
        await super()._start()
        config, store = broker_configs(self.root, self.ns, broker_id=1,
                                       broker_role=BrokerRole.SLAVE, **FAST_HA)
        store.store_path_root_dir = str(self.root / "slave" / "store")
        self.slave = BrokerController(config, store)
        await self.slave.start()
        master = self.broker
        assert master is not None
        async with asyncio.timeout(60):
            while not (master.state.ha and master.state.ha.connections):
                await asyncio.sleep(0.01)

    async def _stop(self) -> None:
        if self.slave is not None:
            await self.slave.stop()
        await super()._stop()


def roles(pilot: Any) -> dict[str, str]:
    return {r["addr"]: r["role"] for r in table(pilot).shown_rows()}


async def test_switch_over_and_back(tmp_path: Path) -> None:
    pair = PairCluster(tmp_path)
    pair.start()
    try:
        master = pair.broker_addr
        assert pair.slave is not None
        slave = pair.slave.addr
        pair.create_topic("Orders", queues=1)
        pair.send("Orders", b"before")
        app = dashboard(pair.ns, start="ha")
        async with app.run_test(size=SIZE) as pilot:
            screen = await loaded(pilot, ReplicationScreen)
            assert roles(pilot) == {master: "ASYNC_MASTER", slave: "SLAVE"}
            for promoted, demoted in ((slave, master), (master, slave)):
                await pilot.press("w")
                await until(pilot, lambda: isinstance(app.screen, ChangeScreen)
                            and app.screen.state == "planned", what="the plan")
                plan = app.screen.plan_view
                assert plan is not None and plan.rows[0]["promote"] == promoted
                assert not plan.risk
                dialog = await finish(pilot)
                assert dialog.state == "done", dialog.outcome
                steps = [line.split("] ", 1)[1].split(":")[0] for line in dialog.steps]
                assert steps[:4] == ["write-protect", "fence", "catch-up", "promote"]
                assert "verify" in steps and "rollback" not in steps
                await pilot.press("escape")
                loads = screen.loads
                await pilot.press("ctrl+r")  # read the roles now, not at the next interval
                await until(pilot, lambda: screen.loads > loads  # noqa: B023
                            and roles(pilot).get(promoted, "").endswith("MASTER")  # noqa: B023
                            and roles(pilot).get(demoted) == "SLAVE",  # noqa: B023
                            timeout=20, what="the new roles")
        assert [(r["command"], r["outcome"]) for r in history.records()] == \
            [("switchover", "applied"), ("switchover", "applied")]
    finally:
        pair.stop()

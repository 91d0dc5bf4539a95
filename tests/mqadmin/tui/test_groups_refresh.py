"""The Consumer groups screen's refresh on a real broker: one GET_BROKER_CONSUME_STATS gives
the lag and the verdicts' sampling, the client lists say who is online; per group, only the
groups that pop (here a 5.x client's, told by its id) have their consume stats read again,
and no group's consumer list is asked."""

from __future__ import annotations

from collections import Counter
from typing import Any

from engine.protocol.codes import RequestCode
from mqadmin.tui.screens.groups import GroupsScreen
from tests.mqadmin.conftest import BackgroundCluster
from tests.mqadmin.tui.pilot import SIZE, dashboard, loaded, table, until

GRPC_CLIENT = "10.0.0.1@4242@0@1a2b3c"  # a 5.x client's id: host@pid@index@time


async def test_a_refresh_reads_the_broker_wide_stats_and_only_popping_groups_per_group(
        cluster: BackgroundCluster) -> None:
    cluster.create_topic("T", queues=1)
    for group in ("offline-g", "online-g"):
        cluster.create_group(group)
        cluster.create_topic(f"%RETRY%{group}", queues=1)
    for _ in range(3):
        cluster.send("T")
    for group in ("offline-g", "online-g"):
        cluster.commit(group, "T", 0, 1)
    cluster.consumer_online("online-g", ("T",), client_id=GRPC_CLIENT)

    app = dashboard(cluster.ns, start="groups")
    async with app.run_test(size=SIZE) as pilot:
        screen = await loaded(pilot, GroupsScreen)
        rows = {r["group"]: r for r in table(pilot).shown_rows()}
        assert {g: (r["lag"], r["clients"], r["state"]) for g, r in rows.items()} == {
            "offline-g": (2, 0, "OFFLINE"), "online-g": (2, 1, "ONLINE")}
        assert rows["online-g"]["kind"].endswith("gRPC")
        assert all(r["verdict"] for r in rows.values())

        admin = app.backend._admin
        assert admin is not None
        sent: Counter[int] = Counter()
        call = admin.broker._call

        async def counted(addr: str, code: int, *args: Any, **kwargs: Any) -> Any:
            sent[code] += 1
            return await call(addr, code, *args, **kwargs)

        admin.broker._call = counted  # type: ignore[method-assign]
        loads = screen.loads
        screen.action_refresh_now()
        await until(pilot, lambda: screen.loads > loads, what="a refresh")

        assert sent[RequestCode.GET_BROKER_CONSUME_STATS] == 1
        assert sent[RequestCode.GET_CONSUME_STATS] == 1  # online-g: its clients pop
        assert sent[RequestCode.GET_CONSUMER_LIST_BY_GROUP] == 0
        assert sent[RequestCode.GET_CONSUMER_CONNECTION_LIST] == 2
        rows = {r["group"]: r for r in table(pilot).shown_rows()}
        assert len(rows["online-g"]["history"]) == 3  # two samples, then one a refresh

"""A sampling kept between reads (the dashboard's refreshes without a collector): the first
read samples twice, each later read once, judged with the samples kept before; queues no
longer read are dropped."""

from __future__ import annotations

from mqadmin.operations.lag.status import KeptSampling
from mqadmin.reports.contract import GroupStatus
from tests.lag.conftest import Lab


async def test_each_read_adds_one_sample_to_the_ones_kept(lab: Lab) -> None:
    await lab.group("g1", "T1", queues=1)
    await lab.send("T1", 5, queue_id=0)
    await lab.commit("g1", "T1", 0, 1)
    kept = KeptSampling("test", samples=2, spacing=0.05)

    first = await kept.report(lab.admin)
    [g1] = first.groups
    assert (g1.group, g1.lags) == ("g1", (4, 4))
    assert first.source == "sampled" and first.interval_ms >= 50  # measured between samples

    await lab.commit("g1", "T1", 0, 3)  # consuming: the lag falls
    second = await kept.report(lab.admin)
    [g1] = second.groups
    assert g1.lags == (4, 4, 2)
    assert g1.verdict.status is GroupStatus.OK

    await lab.group("g2", "T1", queues=1)  # a new group joins the kept series
    await lab.commit("g2", "T1", 0, 5)
    third = await kept.report(lab.admin)
    assert {g.group: g.lags for g in third.groups} == {"g1": (4, 4, 2, 2), "g2": (0,)}

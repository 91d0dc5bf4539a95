"""A cycle given what its caller read already (`Known`: the broker-wide consume stats, the
online groups) takes each group's queues from it and asks the broker per group only for
the groups that pop and this cycle's slice of the others; it asks no group's consumers."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from engine.client.admin.cluster import MQAdmin
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.codes import RequestCode
from mqadmin.operations.consume_stats import read_lags
from mqadmin.operations.lag.sample import Known, Sampler
from tests.lag.conftest import Lab


def count_requests(admin: MQAdmin, monkeypatch: pytest.MonkeyPatch) -> Counter[int]:
    """The request codes `admin` sends to brokers from now on (the calls still go out)."""
    sent: Counter[int] = Counter()
    call = admin.broker._call

    async def counted(addr: str, code: int, *args: Any, **kwargs: Any) -> Any:
        sent[code] += 1
        return await call(addr, code, *args, **kwargs)

    monkeypatch.setattr(admin.broker, "_call", counted)
    return sent


async def test_a_known_cycle_reads_per_group_only_what_the_broker_wide_answer_lacks(
        lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    for group in ("g0", "g1", "g2"):
        await lab.group(group, "T1", queues=1)
        await lab.admin.broker.create_group(lab.addr, SubscriptionGroupConfig(group))
        await lab.commit(group, "T1", 0, 1)
    await lab.send("T1", 3, queue_id=0)
    lags = await read_lags(lab.admin, [lab.addr])
    known = Known(lags.tables({"broker-a": lab.addr}), frozenset({"broker-a"}),
                  online=frozenset({"g1"}), popping=frozenset({"g2"}))
    sampler = Sampler("test", 1000, sweep=3)
    sent = count_requests(lab.admin, monkeypatch)

    cycle = await sampler.sample(lab.admin, known=known)

    # g0: this cycle's slice of the sweep; g2: it pops; g1 from the broker-wide answer
    assert sent[RequestCode.GET_CONSUME_STATS] == 2
    assert sent[RequestCode.GET_CONSUMER_LIST_BY_GROUP] == 0
    assert sent[RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG] == 0  # the groups are known
    rows = {s.group: s for s in cycle.samples if s.topic == "T1"}
    assert {g: (s.broker_offset, s.consumer_offset, s.lag) for g, s in rows.items()} == {
        g: (3, 1, 2) for g in ("g0", "g1", "g2")}
    assert rows["g1"].commit_ts == cycle.ts  # online: it still commits

    sent.clear()
    await sampler.sample(lab.admin, known=known)  # the next slice: g1, and g2 (pops)
    assert sent[RequestCode.GET_CONSUME_STATS] == 2


async def test_a_broker_missing_from_the_known_answer_is_read_per_group(
        lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    await lab.group("g0", "T1", queues=1)
    await lab.commit("g0", "T1", 0, 0)
    sent = count_requests(lab.admin, monkeypatch)
    known = Known({}, frozenset(), online=frozenset())

    cycle = await Sampler("test", 1000, sweep=1000).sample(lab.admin, known=known)

    assert {s.group for s in cycle.samples} == {"g0"}
    assert sent[RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG] == 1
    assert sent[RequestCode.GET_CONSUME_STATS] >= 1

"""Sampling a real broker: one row per group x queue, lag in messages and time, rates, gaps."""

from __future__ import annotations

from mqadmin.operations.lag.sample import Sampler
from tests.clock import ManualClock
from tests.lag.conftest import Lab, wall_ms


async def test_samples_offsets_lag_time_and_rates(lab: Lab) -> None:
    await lab.group("g1", "T1")
    await lab.send("T1", 5, queue_id=0)
    await lab.send("T1", 2, queue_id=1)
    await lab.commit("g1", "T1", 0, 1)
    await lab.commit("g1", "T1", 1, 2)
    clock = ManualClock(wall_ms() + 1000)
    sampler = Sampler("test", 10_000, clock=clock)
    cycle = await sampler.sample(lab.admin)
    assert cycle.ok and cycle.groups == ("g1",) and not cycle.gaps
    rows = {(s.topic, s.queue_id): s for s in cycle.samples}
    q0, q1 = rows[("T1", 0)], rows[("T1", 1)]
    assert (q0.broker_offset, q0.consumer_offset, q0.lag) == (5, 1, 4)
    assert q0.lag_ms is not None and 1000 <= q0.lag_ms < 60_000
    assert q0.oldest_phys is not None and q0.produce_rate is None
    assert (q1.lag, q1.lag_ms, q1.oldest_phys) == (0, 0, None)

    await lab.send("T1", 10, queue_id=0)
    await lab.commit("g1", "T1", 0, 6)
    clock.advance(10_000)
    again = {(s.topic, s.queue_id): s for s in (await sampler.sample(lab.admin)).samples}
    assert again[("T1", 0)].produce_rate == 1.0
    assert again[("T1", 0)].consume_rate == 0.5
    assert again[("T1", 0)].commit_ts == clock.now


async def test_broker_gone_is_a_gap(lab: Lab) -> None:
    await lab.group("g1", "T1")
    await lab.commit("g1", "T1", 0, 0)
    sampler = Sampler("test", 1000)
    assert (await sampler.sample(lab.admin)).samples
    await lab.broker.stop()
    cycle = await sampler.sample(lab.admin)
    assert not cycle.samples
    assert [(g.group, g.broker) for g in cycle.gaps] == [("g1", "broker-a")]


def test_fast_consume_stats_decoder_matches_the_generic_one() -> None:
    from engine.client.core.broker_call import decode_body
    from engine.protocol import fastjson
    from engine.protocol.body.admin import ConsumeStats, OffsetWrapper
    from engine.protocol.body.message_queue import MessageQueue
    from engine.protocol.wire import to_json
    from mqadmin.operations.stats_bodies import decode_consume_stats

    table = {MessageQueue('odd"topic\\', "broker-a", 0): OffsetWrapper(5, 3, 17),
             MessageQueue("%RETRY%g", "broker-b", 7): OffsetWrapper(9, 0, 0)}
    body = fastjson.dumpb(to_json(ConsumeStats(table, 1.5)))
    assert decode_consume_stats(body, "x") == decode_body(ConsumeStats, body, "x").offset_table
    assert decode_consume_stats(body, "x") == table
    other = body.replace(b'"brokerOffset"', b'"brokerOffset" ')  # not fastjson's shape
    assert decode_consume_stats(other, "x") == table
    assert decode_consume_stats(None, "x") == {}

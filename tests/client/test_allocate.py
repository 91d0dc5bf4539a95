"""Allocation strategies: the spec's formulas and examples, and full coverage of the queues."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.client.consume.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateStrategy,
)
from engine.protocol.body.message_queue import MessageQueue

STRATEGIES: list[AllocateStrategy] = [AllocateMessageQueueAveragely(),
                                      AllocateMessageQueueAveragelyByCircle()]


def queues(n: int) -> list[MessageQueue]:
    return [MessageQueue("T", "broker-a", i) for i in range(n)]


def ids(mqs: list[MessageQueue]) -> list[int]:
    return [mq.queue_id for mq in mqs]


def test_averagely_gives_contiguous_blocks_extra_queues_first() -> None:
    avg = AllocateMessageQueueAveragely()
    cids = ["c0", "c1", "c2"]
    assert [ids(avg.allocate("G", c, queues(8), cids)) for c in cids] == [
        [0, 1, 2], [3, 4, 5], [6, 7]]
    assert [ids(avg.allocate("G", c, queues(2), cids)) for c in cids] == [[0], [1], []]
    assert [ids(avg.allocate("G", c, queues(4), ["a", "b"])) for c in ["a", "b"]] == [
        [0, 1], [2, 3]]


def test_by_circle_deals_round_robin() -> None:
    circle = AllocateMessageQueueAveragelyByCircle()
    cids = ["c0", "c1", "c2"]
    assert [ids(circle.allocate("G", c, queues(8), cids)) for c in cids] == [
        [0, 3, 6], [1, 4, 7], [2, 5]]


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.name)
def test_unknown_consumer_gets_nothing_and_empty_inputs_are_refused(
        strategy: AllocateStrategy) -> None:
    assert strategy.allocate("G", "stranger", queues(4), ["c0", "c1"]) == []
    with pytest.raises(ValueError):
        strategy.allocate("G", "c0", [], ["c0"])
    with pytest.raises(ValueError):
        strategy.allocate("G", "c0", queues(1), [])
    with pytest.raises(ValueError):
        strategy.allocate("G", "", queues(1), ["c0"])


@given(n=st.integers(1, 64), m=st.integers(1, 20), which=st.sampled_from(STRATEGIES))
def test_every_queue_goes_to_exactly_one_consumer(n: int, m: int,
                                                  which: AllocateStrategy) -> None:
    mq_all = queues(n)
    cids = sorted(f"10.0.0.{i}@{i}" for i in range(m))
    shares = [which.allocate("G", c, mq_all, cids) for c in cids]
    flat = [mq for share in shares for mq in share]
    assert sorted(flat) == mq_all
    sizes = [len(share) for share in shares]
    assert max(sizes) - min(sizes) <= 1

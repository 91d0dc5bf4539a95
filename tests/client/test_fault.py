"""Send latency fault tolerance and queue selection (client-behaviour.md §2.3), as pure units."""

from __future__ import annotations

from engine.client.core.fault import (
    LATENCY_MAX_5,
    NOT_AVAILABLE_DURATION_5,
    LatencyFaultTolerance,
)
from engine.client.core.publish import QueueIndex, TopicPublishInfo, publish_info, select_queue
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.route import BrokerData, QueueData, TopicRouteData
from tests.clock import ManualClock


def info() -> TopicPublishInfo:
    route = TopicRouteData(
        queue_datas=[QueueData("broker-b", 2, 2, 6), QueueData("broker-a", 2, 2, 6),
                     QueueData("broker-r", 2, 2, 4), QueueData("broker-s", 2, 2, 6)],
        broker_datas=[BrokerData("C", "broker-a", {0: "a:1"}),
                      BrokerData("C", "broker-b", {0: "b:1"}),
                      BrokerData("C", "broker-r", {0: "r:1"}),  # read-only queues
                      BrokerData("C", "broker-s", {1: "s:1"})])  # no master
    return publish_info("T", route)


def test_publish_queues_are_writable_brokers_with_a_master_sorted_by_name() -> None:
    assert [(q.broker_name, q.queue_id) for q in info().queues] == [
        ("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)]
    ordered = publish_info("T", TopicRouteData(order_topic_conf="broker-b:1;broker-a:2"))
    assert ordered.order_topic and [(q.broker_name, q.queue_id) for q in ordered.queues] == [
        ("broker-b", 0), ("broker-a", 0), ("broker-a", 1)]


def test_ban_durations_follow_the_4_9_7_and_5_tables() -> None:
    fault = LatencyFaultTolerance(enabled=True)
    assert [fault.not_available_duration_for(ms) for ms in (0, 99, 100, 549, 550, 1000, 2000,
                                                            3000, 14999, 15000, 30000)] == [
        0, 0, 0, 0, 30000, 60000, 120000, 180000, 180000, 600000, 600000]
    five = LatencyFaultTolerance(enabled=True, latency_max=LATENCY_MAX_5,
                                 not_available_duration=NOT_AVAILABLE_DURATION_5)
    assert five.not_available_duration_for(30000) == 30000  # an isolated broker, 5.x
    assert five.not_available_duration_for(1800) == 5000


def test_failures_ban_a_broker_until_its_time_is_up() -> None:
    clock = ManualClock()
    fault = LatencyFaultTolerance(enabled=True, clock=clock)
    fault.update("broker-a", 20, isolation=False)
    assert fault.is_available("broker-a")
    fault.update("broker-b", 5, isolation=True)  # an exception: 600 s
    assert not fault.is_available("broker-b")
    clock.advance(599_999)
    assert not fault.is_available("broker-b")
    clock.advance(1)
    assert fault.is_available("broker-b")


def test_disabled_fault_tolerance_records_nothing() -> None:
    fault = LatencyFaultTolerance(enabled=False)
    fault.update("broker-a", 5000, isolation=True)
    assert fault.items == {} and fault.is_available("broker-a")


def test_least_bad_broker_is_available_first_then_fastest() -> None:
    clock = ManualClock()
    fault = LatencyFaultTolerance(enabled=True, clock=clock)
    fault.update("slow", 700, isolation=False)  # banned 30 s
    fault.update("quick", 60, isolation=False)
    fault.update("ok", 80, isolation=False)
    fault.update("dead", 10, isolation=True)
    # sorted: quick, ok (available), dead (banned, 10 ms), slow; the better half rotates
    picks = {fault.pick_one_at_least() for _ in range(10)}
    assert picks == {"quick", "ok"}
    fault.remove("quick")
    fault.remove("ok")
    fault.remove("slow")
    assert fault.pick_one_at_least() == "dead"


def test_round_robin_retry_avoids_the_last_broker() -> None:
    pub = info()
    index = QueueIndex(start=0)
    fault = LatencyFaultTolerance()
    assert select_queue(pub, index, None, fault) == MessageQueue("T", "broker-a", 1)
    assert select_queue(pub, index, None, fault) == MessageQueue("T", "broker-b", 0)
    # index 3 would be broker-b again: the retry walks on to broker-a
    assert select_queue(pub, index, "broker-b", fault).broker_name == "broker-a"


def test_index_wraps_to_31_bits() -> None:
    index = QueueIndex(start=0x7FFFFFFF)
    assert index.next() == 0


def test_fault_tolerance_skips_banned_brokers_and_retargets_when_all_are() -> None:
    clock = ManualClock()
    fault = LatencyFaultTolerance(enabled=True, clock=clock)
    pub = info()
    fault.update("broker-a", 3000, isolation=True)  # timed out: banned 600 s
    for start in range(8):
        assert select_queue(pub, QueueIndex(start), None, fault).broker_name == "broker-b"
    fault.update("broker-b", 2000, isolation=False)  # banned 120 s, latency 2000 < 30000
    mq = select_queue(pub, QueueIndex(5), None, fault)
    assert mq.broker_name == "broker-b" and mq.queue_id in (0, 1)

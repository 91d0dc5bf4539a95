"""Verdicts on real consumers (the client library's push consumer) against a real broker:
a stopped consumer is STOP, a stuck one STALL, resetOffsetByTime backwards REWIND, a slow
one WARNING (and, once production pauses, OK with a finite ETA)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from engine.client.client_config import ClientConfig
from engine.client.consumer_options import ConsumerOptions
from engine.client.message import Message, MessageExt
from engine.client.producer import Producer
from engine.client.push_consumer import PushConsumer
from engine.client.results import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from mqadmin.operations import mutation as mut
from mqadmin.operations.group import reset_offset
from mqadmin.operations.lag.model import QueueKey, QueueSample, Series
from mqadmin.operations.lag.sample import Sampler
from mqadmin.operations.lag.verdict import GroupStatus, Status, group_verdict, queue_verdict
from tests.lag.conftest import Lab

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
STEP = 0.25  # seconds between samples


class Watch:
    """Samples a few groups of the cluster and keeps each queue's series."""

    def __init__(self, lab: Lab, *groups: str) -> None:
        self.lab = lab
        self.groups = list(groups)
        self.sampler = Sampler("t", int(STEP * 1000))
        self.series: dict[QueueKey, list[QueueSample]] = {}

    async def sample(self, n: int = 1) -> None:
        for i in range(n):
            if i:
                await asyncio.sleep(STEP)
            cycle = await self.sampler.sample(self.lab.admin, self.groups)
            for s in cycle.samples:
                self.series.setdefault(s.key, []).append(s)

    def verdict(self, group: str, topic: str = "T", window: int = 4) -> Any:
        queues = [queue_verdict(Series(k, tuple(v)), window=window)
                  for k, v in self.series.items() if k[0] == group and k[1] == topic]
        return group_verdict(group, queues)


@pytest.fixture
async def started(lab: Lab) -> AsyncIterator[Callable[..., Awaitable[PushConsumer]]]:
    config = ClientConfig(namesrv_addr=lab.ns, client_ip="127.0.0.1",
                          persist_consumer_offset_interval=100, rebalance_interval=500)
    consumers: list[PushConsumer] = []

    async def start(group: str, listener: Any, threads: int = 1) -> PushConsumer:
        c = PushConsumer(group, dataclasses.replace(config, instance_name=group),
                         options=ConsumerOptions(
            consume_thread_max=threads, await_termination_millis=100))
        c.subscribe("T", "*")
        c.register_concurrently(listener)
        await c.start()
        consumers.append(c)
        return c

    try:
        yield start
    finally:
        for c in consumers:
            await c.shutdown()


async def produce(producer: Producer, n: int) -> None:
    for i in range(n):
        await producer.send(Message("T", f"m{i}".encode()))


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 20) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def committed(lab: Lab, group: str) -> int:
    stats = await lab.admin.broker.consume_stats(lab.addr, group, "T")
    return sum(w.consumer_offset for w in stats.offset_table.values())


async def test_stop_stall_rewind_and_warning(lab: Lab, started: Any) -> None:
    await lab.topic("T", 2)
    for group in ("stopper", "staller", "slow", "rewinder"):
        for q in (0, 1):
            await lab.commit(group, "T", q, 0)  # groups that consumed before
    producer = Producer("lag-test-producer", ClientConfig(namesrv_addr=lab.ns,
                                                          client_ip="127.0.0.1"))
    await producer.start()
    try:
        async def fast(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                       ) -> ConsumeConcurrentlyStatus:
            return OK

        never = asyncio.Event()

        async def stuck(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                        ) -> ConsumeConcurrentlyStatus:
            await never.wait()
            return OK

        async def slow(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                       ) -> ConsumeConcurrentlyStatus:
            await asyncio.sleep(0.1)
            return OK

        stopper = await started("stopper", fast, threads=4)
        rewinder = await started("rewinder", fast, threads=4)
        await started("staller", stuck)
        slow_consumer = await started("slow", slow)
        before_rewind = lab_now()
        await asyncio.sleep(0.01)
        await produce(producer, 10)
        await until(lambda: _above(committed(lab, "stopper"), 0))
        await until(lambda: _above(committed(lab, "rewinder"), 0))
        await stopper.shutdown()  # consumers gone
        await rewinder.shutdown()

        watch = Watch(lab, "stopper", "staller", "slow", "rewinder")
        for i in range(4):  # production outpaces the slow consumer
            await produce(producer, 12)
            if i == 3:  # resetOffsetByTime to before the rewinder's messages
                planned = await mut.plan(reset_offset(lab.admin, "rewinder", "T",
                                                      before_rewind))
                await mut.apply(planned)
            await slow_consumer.persist_offsets()
            await watch.sample()
            await asyncio.sleep(STEP)

        stop = watch.verdict("stopper")
        assert stop.status is GroupStatus.ERROR and stop.worst.status is Status.STOP
        stall = watch.verdict("staller")
        assert stall.worst.status is Status.STALL and stall.eta_s is None
        warn = watch.verdict("slow")
        assert warn.status is GroupStatus.WARNING, [q.rule for q in warn.queues]
        assert warn.eta_s is None  # the lag never fell: never at the current rate
        rewind = watch.verdict("rewinder")
        assert rewind.worst.status is Status.REWIND, rewind.worst.rule

        for _ in range(4):  # production paused: the slow consumer drains
            await asyncio.sleep(STEP)
            # what the client's periodic persist does (its first run is 10 s after start)
            await slow_consumer.persist_offsets()
            await watch.sample()
        drained = watch.verdict("slow")
        assert drained.status is GroupStatus.OK, [q.rule for q in drained.queues]
        assert drained.eta_s is not None and drained.eta_s > 0
    finally:
        never.set()
        await producer.shutdown()


async def _above(value: Awaitable[int], floor: int) -> bool:
    return await value > floor


def lab_now() -> int:
    return int(time.time() * 1000)

"""The client library's own CPU cost per message: producer sends and push-consumer receipt.

Runs `mqnamesrv` and `mqbroker` as processes of their own and measures `time.process_time()`
of this process - the client - around each phase, so the servers' work is not counted:
  * sync sends of 1 KiB messages with 1 and with 64 sends in flight;
  * batch sends, 32 x 1 KiB per SEND_BATCH_MESSAGE, 8 batches in flight;
  * a push consumer (no-op listener, clustering, offsets committed) draining what was sent.
Prints the median CPU microseconds per message over the runs, and messages per second of wall
time for context (the broker shares the machine).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from benchmarks.machine import machine
from benchmarks.processes import broker_process, free_port, wait_listening
from engine.client import (
    BrokerAdmin,
    ClientConfig,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumerOptions,
    Message,
    MessageExt,
    NamesrvAdmin,
    Producer,
    PushConsumer,
)
from engine.client.core.errors import ClientError
from engine.protocol.body.heartbeat import ConsumeFromWhere
from engine.protocol.body.topic import TopicConfig
from engine.remoting.client import RemotingClient
from engine.remoting.loop import run

BODY = b"x" * 1024
TOPIC = "ClientBenchTopic"
QUEUES = 8
RUNS = 5
SENDS = 10_240  # a multiple of the batch size
BATCH = 32


@contextlib.contextmanager
def namesrv_process() -> Iterator[str]:
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp, "namesrv.properties")
        conf.write_text(f"listenPort={port}\nkvConfigPath={tmp}/kvConfig.json\n"
                        f"logsDir={tmp}/logs\nbindAddress=127.0.0.1\n")
        proc = subprocess.Popen([sys.executable, "-m", "engine.namesrv.main", "-c", str(conf)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, "HOME": tmp})
        try:
            asyncio.run(wait_listening(port, proc))
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(30)


async def prepare(namesrv: str, broker: str) -> None:
    """Wait until the broker is registered, then create the topic with QUEUES queues."""
    client = RemotingClient()
    try:
        admin = BrokerAdmin(client)
        await admin.create_topic(broker, TopicConfig(TOPIC, QUEUES, QUEUES))
        async with NamesrvAdmin(namesrv) as ns:
            for _ in range(200):
                with contextlib.suppress(ClientError):
                    route = await ns.topic_route(TOPIC)
                    if route.queue_datas:
                        return
                await asyncio.sleep(0.05)
        raise SystemExit("the topic never showed up on the name server")
    finally:
        await client.close()


async def measure(count: int, action: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    """(client CPU us per message, messages per wall second) of one run of `action`."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await action()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return cpu / count * 1e6, count / wall


def report(label: str, runs: list[tuple[float, float]]) -> None:
    cpus = [c for c, _ in runs]
    rates = [r for _, r in runs]
    print(f"{label}: median {statistics.median(cpus):.1f} us CPU/msg "
          f"(min {min(cpus):.1f}, max {max(cpus):.1f}); "
          f"{statistics.median(rates):,.0f} msgs/s wall, {len(runs)} runs")


async def sends(producer: Producer, in_flight: int, count: int) -> None:
    remaining = iter(range(count))

    async def worker() -> None:
        for _ in remaining:
            await producer.send(Message(TOPIC, BODY, tags="TagA", keys="bench"))

    await asyncio.gather(*(worker() for _ in range(in_flight)))


async def batches(producer: Producer, in_flight: int, count: int, size: int) -> None:
    """`count` messages (a multiple of `size`) in batches of `size`."""
    remaining = iter(range(count // size))

    async def worker() -> None:
        for _ in remaining:
            await producer.send_batch([Message(TOPIC, BODY, tags="TagA") for _ in range(size)])

    await asyncio.gather(*(worker() for _ in range(in_flight)))


async def bench_producer(config: ClientConfig) -> int:
    producer = Producer("ClientBenchPG", config)
    await producer.start()
    sent = 0
    try:
        await sends(producer, 64, 2000)  # warm-up: routes, connection, broker caches
        sent += 2000
        for in_flight, count in ((1, SENDS // 4), (64, SENDS)):
            runs = []
            for _ in range(RUNS):
                runs.append(await measure(count, functools.partial(sends, producer, in_flight,
                                                                   count)))
                sent += count
            report(f"sync send, 1 KiB, {in_flight} in flight", runs)
        runs = []
        for _ in range(RUNS):
            runs.append(await measure(SENDS, functools.partial(batches, producer, 8, SENDS,
                                                               BATCH)))
            sent += SENDS
        report(f"batch send, {BATCH} x 1 KiB per request, 8 in flight", runs)
    finally:
        await producer.shutdown()
    return sent


async def bench_consumer(config: ClientConfig, stored: int) -> None:
    runs = []
    for run_no in range(RUNS):
        done = asyncio.Event()
        received = 0

        def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                     ) -> ConsumeConcurrentlyStatus:
            nonlocal received
            received += len(msgs)
            if received >= stored:
                done.set()  # noqa: B023 - the listener lives (and dies) with this run
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(f"ClientBenchCG{run_no}", config, options=ConsumerOptions(
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET))
        consumer.subscribe(TOPIC, "*")
        consumer.register_concurrently(listener)

        async def drain(consumer: PushConsumer = consumer, done: asyncio.Event = done) -> None:
            await consumer.start()
            await asyncio.wait_for(done.wait(), 300)

        runs.append(await measure(stored, drain))
        await consumer.shutdown()
    report(f"push consume, no-op listener, {QUEUES} queues ({stored:,} msgs)", runs)


async def bench(namesrv: str, broker: str) -> None:
    await prepare(namesrv, broker)
    config = ClientConfig(namesrv_addr=namesrv)
    stored = await bench_producer(config)
    await bench_consumer(config, stored)


def main() -> None:
    print(machine())
    with namesrv_process() as namesrv, broker_process(namesrvAddr=namesrv) as broker:
        run(bench(namesrv, broker))


if __name__ == "__main__":
    main()

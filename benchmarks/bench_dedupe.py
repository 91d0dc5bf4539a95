"""Listener overhead of idempotent consumption (`Dedupe` with the SQLite key store).

Feeds messages with distinct KEYS to a concurrent consume service (one message per
listener call; what arrived together, here each millisecond's messages, handed over as one
pull) of a broadcasting consumer that is never started, paced at a fixed rate (default
10,000 messages/s), once without the option and once with `Dedupe` over a `SqliteKeyStore`
in a temporary directory.  The overhead per message is the difference in
this process's CPU time (`time.process_time`, which includes the store's worker thread)
divided by the messages.  Also prints how many keys one SQLite transaction claimed or finished.
No broker: this isolates what the option adds.

Then, end to end: `mqnamesrv` and `mqbroker` processes, 30,000 keyed 1 KiB messages, and a
real `PushConsumer` with its default options draining them with a no-op listener, as a plain
function, as a coroutine, and as a plain function under `Dedupe`, then an orderly listener
alone and under `Dedupe`, with batches of 1 and of 32 messages: messages per second and this
process's CPU per message, which is what an application sees when it turns the option on.
The machine may be shared: compare each figure with Dedupe to the one without it in the
same run.

    python -m benchmarks.bench_dedupe [--rate 10000] [--messages 40000] [--runs 5]
                                      [--consumed 30000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.bench_client import BODY, TOPIC, measure, namesrv_process, prepare, report
from benchmarks.machine import machine
from benchmarks.processes import broker_process
from engine.client import (
    ClientConfig,
    ConsumerOptions,
    Message,
    Producer,
    PushConsumer,
)
from engine.client.consume import dedupe
from engine.client.consume.consume_concurrently import ConsumeConcurrentlyService
from engine.client.consume.dedupe_services import DedupeConcurrentlyService
from engine.client.consume.dedupe_sqlite import SqliteKeyStore
from engine.client.consume.process_queue import ProcessQueue
from engine.client.core.message import MessageExt
from engine.client.core.results import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from engine.protocol.body.heartbeat import ConsumeFromWhere, MessageModel
from engine.protocol.body.message_queue import MessageQueue
from engine.remoting.loop import run

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
MQ = MessageQueue("BenchTopic", "broker-a", 0)
TICK = 0.001  # seconds between paced bursts


def messages(count: int, run: int) -> list[MessageExt]:
    host = ("127.0.0.1", 10911)
    return [MessageExt("BenchTopic", b"x" * 1024, {"KEYS": f"order-{run}-{i}"}, "broker-a",
                       0, i, i * 1200, 0, 0, 0, host, 0, host, 0, 0) for i in range(count)]


def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
             ) -> ConsumeConcurrentlyStatus:
    return OK


async def feed(msgs: list[MessageExt], rate: int, call: Callable[[list[MessageExt]], Any],
               drained: Callable[[], Awaitable[None]]) -> float:
    """Submit `msgs` at `rate`/s, each millisecond's as one pull; CPU seconds used until
    `drained`."""
    per_tick = max(1, int(rate * TICK))
    cpu = time.process_time()
    start = time.monotonic()
    for i in range(0, len(msgs), per_tick):
        call(msgs[i:i + per_tick])
        delay = start + (i // per_tick + 1) * TICK - time.monotonic()
        await asyncio.sleep(max(delay, 0))
    await drained()
    return time.process_time() - cpu


async def through_service(msgs: list[MessageExt], rate: int, folder: Path,
                          store: SqliteKeyStore | None) -> float:
    """CPU seconds of a concurrent consume service acknowledging `msgs` (fed at `rate`)."""
    consumer = PushConsumer("BenchCG", ClientConfig(namesrv_addr="127.0.0.1:9"),
                            options=ConsumerOptions(message_model=MessageModel.BROADCASTING,
                                                    local_offset_store_dir=str(folder)))
    service = (ConsumeConcurrentlyService(consumer, listener) if store is None
               else DedupeConcurrentlyService(consumer, listener, dedupe.Guard(
                   dedupe.Dedupe(store), "BenchCG", dedupe.new_owner("bench"))))
    pq = ProcessQueue()

    def pull(pulled: list[MessageExt]) -> None:
        pq.put(pulled)
        service.submit(pulled, pq, MQ, True)

    async def drained() -> None:
        while pq.msg_count:
            await asyncio.sleep(TICK)

    return await feed(msgs, rate, pull, drained)


async def one_run(count: int, rate: int, run: int, folder: Path) -> tuple[float, float, float]:
    """(plain CPU us/msg, dedupe CPU us/msg, keys claimed or finished per transaction)."""
    plain = await through_service(messages(count, run), rate, folder / f"plain-{run}", None)
    store = SqliteKeyStore(folder / f"keys-{run}.db")
    with_dedupe = await through_service(messages(count, run), rate, folder / f"dedupe-{run}",
                                        store)
    per_tx = 2 * count / max(store.transactions, 1)  # a key claimed and finished a message
    await store.close()
    return plain / count * 1e6, with_dedupe / count * 1e6, per_tx


async def main(rate: int, count: int, runs: int) -> None:
    print(f"machine: {machine()}")
    print(f"{count} messages per run at {rate}/s, {runs} runs")
    plain: list[float] = []
    overhead: list[float] = []
    per_tx: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(runs):
            p, d, t = await one_run(count, rate, run, Path(tmp))
            plain.append(p)
            overhead.append(d - p)
            per_tx.append(t)
            print(f"  run {run}: plain {p:.1f} us/msg, with dedupe {d:.1f} us/msg "
                  f"(+{d - p:.1f}), {t:.0f} keys claimed or finished per transaction")
    print(f"listener overhead: median {statistics.median(overhead):.1f} us/msg "
          f"(min {min(overhead):.1f}, max {max(overhead):.1f}); plain path median "
          f"{statistics.median(plain):.1f} us/msg; keys claimed or finished per transaction median "
          f"{statistics.median(per_tx):.0f}")


async def produce_keyed(config: ClientConfig, count: int) -> None:
    producer = Producer("DedupeBenchPG", config)
    await producer.start()
    try:
        numbers = iter(range(count))

        async def worker() -> None:
            for i in numbers:
                await producer.send(Message(TOPIC, BODY, keys=f"order-{i}"))

        await asyncio.gather(*(worker() for _ in range(64)))
    finally:
        await producer.shutdown()


async def drain(config: ClientConfig, group: str, count: int, listener: Any,
                store_dir: Path | None, *, orderly: bool = False,
                batch: int = 1) -> tuple[float, float]:
    """(client CPU us/msg, msgs/s) of a push consumer with default options (but
    `consume_message_batch_max_size` = `batch`) draining `count` messages, concurrently or
    `orderly`, with `Dedupe` over a store in `store_dir` when given."""
    done = asyncio.Event()
    seen = 0

    def counted(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> Any:
        nonlocal seen
        seen += len(msgs)
        if seen >= count:
            done.set()
        return listener(msgs, ctx)

    store = None if store_dir is None else SqliteKeyStore(store_dir / f"{group}.db")
    consumer = PushConsumer(group, config, options=ConsumerOptions(
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        consume_message_batch_max_size=batch,
        dedupe=None if store is None else dedupe.Dedupe(store)))
    consumer.subscribe(TOPIC, "*")
    if orderly:
        consumer.register_orderly(counted)
    else:
        consumer.register_concurrently(counted)

    async def consume() -> None:
        await consumer.start()
        await asyncio.wait_for(done.wait(), 300)

    try:
        return await measure(count, consume)
    finally:
        await consumer.shutdown()
        if store is not None:
            await store.close()


async def async_listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                         ) -> ConsumeConcurrentlyStatus:
    return OK


def orderly_listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext
                     ) -> ConsumeOrderlyStatus:
    return ConsumeOrderlyStatus.SUCCESS


async def end_to_end(namesrv: str, broker: str, count: int, runs: int) -> None:
    await prepare(namesrv, broker)
    config = ClientConfig(namesrv_addr=namesrv)
    await produce_keyed(config, count)
    print(f"push consumer, default options (consume_thread_max 20), {count:,} keyed messages:")
    cases: list[tuple[str, Any, bool, bool, int, int]] = [
        ("plain function listener", listener, False, False, 1, runs),
        ("coroutine listener", async_listener, False, False, 1, runs),
        ("plain function listener with Dedupe", listener, True, False, 1, runs),
        ("orderly, batches of 1", orderly_listener, False, True, 1, runs),
        ("orderly with Dedupe, batches of 1", orderly_listener, True, True, 1, runs),
        ("orderly, batches of 32", orderly_listener, False, True, 32, runs),
        ("orderly with Dedupe, batches of 32", orderly_listener, True, True, 32, runs)]
    with tempfile.TemporaryDirectory() as tmp:
        for n, (label, call, deduplicated, orderly, batch, times) in enumerate(cases):
            results = [await drain(config, f"DedupeBenchCG{n}-{i}", count, call,
                                   Path(tmp) if deduplicated else None, orderly=orderly,
                                   batch=batch)
                       for i in range(times)]
            report(f"  {label}", results)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=40_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--consumed", type=int, default=30_000)
    args = parser.parse_args()
    run(main(args.rate, args.messages, args.runs))
    with namesrv_process() as ns, broker_process(namesrvAddr=ns) as broker_addr:
        run(end_to_end(ns, broker_addr, args.consumed, 3))

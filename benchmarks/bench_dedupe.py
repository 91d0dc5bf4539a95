"""Listener overhead of idempotent consumption (`Dedupe` with the SQLite key store).

Feeds messages with distinct KEYS to a listener the way the concurrent consume service
does (one message per listener call), paced at a fixed rate (default 10,000 messages/s),
once with the plain listener and once wrapped by `dedupe.concurrently` over a
`SqliteKeyStore` in a temporary directory.  The overhead per message is the difference in
this process's CPU time (`time.process_time`, which includes the store's worker thread)
divided by the messages.  Also prints how many messages one SQLite transaction carried and
the claim-to-consumed latency.  No broker: this isolates what the option adds.

    python -m benchmarks.bench_dedupe [--rate 10000] [--messages 40000] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.machine import machine
from engine.client import dedupe
from engine.client.dedupe_sqlite import SqliteKeyStore
from engine.client.message import MessageExt
from engine.client.results import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
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


async def feed(msgs: list[MessageExt], rate: int, call: Callable[[list[MessageExt]], Any]
               ) -> float:
    """Submit `msgs` at `rate`/s as the consume service would; CPU seconds used."""
    per_tick = max(1, int(rate * TICK))
    pending: set[asyncio.Task[Any]] = set()
    cpu = time.process_time()
    start = time.monotonic()
    for i in range(0, len(msgs), per_tick):
        for m in msgs[i:i + per_tick]:
            outcome = call([m])
            if asyncio.iscoroutine(outcome):
                task = asyncio.ensure_future(outcome)
                pending.add(task)
                task.add_done_callback(pending.discard)
        delay = start + (i // per_tick + 1) * TICK - time.monotonic()
        await asyncio.sleep(max(delay, 0))
    while pending:
        await asyncio.gather(*list(pending))
    return time.process_time() - cpu


async def one_run(count: int, rate: int, run: int, folder: Path) -> tuple[float, float, float]:
    """(plain CPU us/msg, dedupe CPU us/msg, messages per transaction)."""
    plain = await feed(messages(count, run), rate, lambda m: listener(m, ctx()))
    store = SqliteKeyStore(folder / f"keys-{run}.db")
    guard = dedupe.Guard(dedupe.Dedupe(store), "BenchCG", dedupe.new_owner("bench"))
    wrapped = dedupe.concurrently(listener, guard)
    with_dedupe = await feed(messages(count, run), rate, lambda m: wrapped(m, ctx()))
    per_tx = 2 * count / max(store.transactions, 1)  # a claim and a finish per message
    await store.close()
    return plain / count * 1e6, with_dedupe / count * 1e6, per_tx


def ctx() -> ConsumeConcurrentlyContext:
    return ConsumeConcurrentlyContext(MQ)


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
                  f"(+{d - p:.1f}), {t:.0f} store operations per transaction")
    print(f"listener overhead: median {statistics.median(overhead):.1f} us/msg "
          f"(min {min(overhead):.1f}, max {max(overhead):.1f}); plain path median "
          f"{statistics.median(plain):.1f} us/msg; store operations per transaction median "
          f"{statistics.median(per_tx):.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=40_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    run(main(args.rate, args.messages, args.runs))

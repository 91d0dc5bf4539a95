"""Dead-letter tools: resend through the ledger, export, and `dlq list` over many groups.

Runs `mqnamesrv` and `mqbroker` as processes of their own; this process is mqadmin.  Fills
``%DLQ%BenchCG`` with 1 KiB dead letters, then measures, `RUNS` times each:
  * resend with the ledger: `dlq_resend.resend` of `RESEND` dead letters to %RETRY%BenchCG
    (ledger rows written ahead and after every chunk of sends; the reading plan is timed
    apart), and the same sends by the bare producer for comparison;
  * export: `dlq_transfer.export` of the whole DLQ as JSON Lines (to /dev/null);
  * `dlq list` (`dlq_list.list_groups`) over `GROUPS` groups with a DLQ each.
Prints medians and percentiles of messages per second of wall time and this process's CPU
microseconds per message, with the targets of the issue (>= 5,000 resends/s, >= 20,000
exported/s, list < 2 s), the machine, and its load average (other work shares it).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.bench_client import namesrv_process
from benchmarks.machine import machine, percentile
from benchmarks.processes import broker_process
from engine.client import ClientConfig, Message, Producer
from engine.client.admin import MQAdmin
from engine.client.errors import ClientError
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.body.topic import TopicConfig
from engine.protocol.perm import PERM_RW
from engine.remoting.loop import run
from mqadmin.operations.dlq import list as dlq_list
from mqadmin.operations.dlq import resend as dlq_resend
from mqadmin.operations.dlq import transfer as dlq_transfer
from mqadmin.operations.dlq.ledger import Ledger
from mqadmin.operations.dlq.model import Filters
from mqadmin.operations.sending import producer

GROUP = "BenchCG"
DEAD = 20_000
RESEND = 5_000
GROUPS = 1_000
RUNS = 5
BODY = b"x" * 1024


async def until_routed(admin: MQAdmin, topic: str) -> None:
    for _ in range(400):
        try:
            if (await admin.namesrv.topic_route(topic)).queue_datas:
                return
        except ClientError:
            pass
        await asyncio.sleep(0.05)
    raise SystemExit(f"{topic} never showed up on the name server")


async def fill(namesrv: str, broker: str, admin: MQAdmin) -> None:
    """The bench group's DLQ (DEAD letters) and GROUPS small DLQs for the list."""
    await admin.broker.create_group(broker, SubscriptionGroupConfig(GROUP))
    for topic in (f"%DLQ%{GROUP}", f"%RETRY%{GROUP}"):
        await admin.broker.create_topic(broker, TopicConfig(topic, 1, 1, PERM_RW))
    for i in range(GROUPS):
        await admin.broker.create_topic(broker, TopicConfig(f"%DLQ%ListCG{i}", 1, 1, PERM_RW))
    await until_routed(admin, f"%DLQ%{GROUP}")
    await until_routed(admin, f"%RETRY%{GROUP}")
    producer = Producer("DlqBenchPG", ClientConfig(namesrv_addr=namesrv))
    await producer.start()

    def dead(topic: str, n: int) -> Message:
        return Message(topic, BODY, tags="TagA", keys=f"order-{n}", properties={"tenant": "t1"},
                       system_properties={"RETRY_TOPIC": "BenchOrders",
                                          "ORIGIN_MESSAGE_ID": f"ORIG{n}"})
    try:
        todo = iter(range(DEAD))

        async def worker() -> None:
            for n in todo:
                await producer.send(dead(f"%DLQ%{GROUP}", n))
        await asyncio.gather(*(worker() for _ in range(64)))
        await until_routed(admin, f"%DLQ%ListCG{GROUPS - 1}")
        for i in range(GROUPS):
            await producer.send(dead(f"%DLQ%ListCG{i}", i))
    finally:
        await producer.shutdown()


async def measure(count: int, action: Callable[[], Awaitable[Any]]) -> tuple[float, float, float]:
    """(messages per wall second, CPU us per message, wall seconds) of one run."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await action()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return count / wall, cpu / count * 1e6, wall


async def plain_sends(p: Producer) -> None:
    """RESEND sends to the retry topic, as many in flight as a resend chunk."""
    for i in range(0, RESEND, dlq_resend.CHUNK):
        await asyncio.gather(*(p.send(Message(f"%RETRY%{GROUP}", BODY, tags="TagA",
                                              keys=f"order-{n}"))
                               for n in range(i, min(i + dlq_resend.CHUNK, RESEND))))


def report(label: str, runs: list[tuple[float, float, float]], target: str) -> None:
    rates = [r for r, _, _ in runs]
    cpus = [c for _, c, _ in runs]
    walls = [w for _, _, w in runs]
    print(f"{label}: median {statistics.median(rates):,.0f} msgs/s (p10 "
          f"{percentile(rates, 10):,.0f}, p90 {percentile(rates, 90):,.0f}); "
          f"{statistics.median(cpus):.1f} us CPU/msg; median {statistics.median(walls):.2f} s "
          f"wall, {len(runs)} runs; target {target}")


async def bench(namesrv: str, broker: str, home: Path) -> None:
    async with MQAdmin(namesrv) as admin:
        await fill(namesrv, broker, admin)
        runs = []
        for _ in range(RUNS):
            out = open(os.devnull, "w")  # noqa: SIM115 - closed right after the run
            try:
                runs.append(await measure(DEAD, lambda out=out: dlq_transfer.export(
                    admin, GROUP, out)))
            finally:
                out.close()
        report(f"export, {DEAD:,} x 1 KiB", runs, ">= 20,000 msgs/s")

        plans, sends = [], []
        with Ledger("bench", home / "mqadmin.db") as ledger:  # one admin database, as in use
            for _ in range(RUNS):
                holder: list[dlq_resend.ResendPlan] = []
                outcomes: list[dlq_resend.ResendOutcome] = []

                async def plan(holder: list[dlq_resend.ResendPlan] = holder) -> None:
                    holder.append(await dlq_resend.plan_resend(
                        admin, ledger, GROUP, Filters(limit=RESEND), again=True))

                async def send(holder: list[dlq_resend.ResendPlan] = holder,
                               outcomes: list[dlq_resend.ResendOutcome] = outcomes) -> None:
                    outcomes.append(await dlq_resend.resend(admin, ledger, holder[0]))
                plans.append(await measure(RESEND, plan))
                sends.append(await measure(RESEND, send))
                assert outcomes[0].sent == RESEND, outcomes[0].failed[:3]
        report(f"resend plan (read {RESEND:,} dead letters)", plans, "-")
        raw = []
        async with producer(admin, retries=0) as p:
            for _ in range(RUNS):
                raw.append(await measure(RESEND, lambda p=p: plain_sends(p)))
        report(f"for comparison: the same {RESEND:,} sends without the ledger", raw, "-")
        report(f"resend with the ledger, {RESEND:,} x 1 KiB to %RETRY%", sends,
               ">= 5,000 msgs/s")

        lists = []
        for _ in range(RUNS):
            rows: list[Any] = []

            async def listing(rows: list[Any] = rows) -> None:
                rows += await dlq_list.list_groups(admin)
            lists.append(await measure(GROUPS, listing))
        assert len(rows) >= GROUPS, len(rows)
        report(f"dlq list over {len(rows):,} groups (per group)", lists, "< 2 s wall")


def main() -> None:
    print(machine())
    print("load average before:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    with tempfile.TemporaryDirectory() as tmp, namesrv_process() as namesrv, \
            broker_process(namesrvAddr=namesrv) as broker:
        run(bench(namesrv, broker, Path(tmp)))
    print("load average after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()

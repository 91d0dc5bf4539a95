"""A big cluster for the console's benchmarks: a name server and two broker sets as processes,
10,000 topics of 8 queues, 3,000 consumer groups, consumers online for a few hundred of them
and dead letters for some (BENCH_TOPICS / BENCH_GROUPS / BENCH_ONLINE / BENCH_DLQ change it).

How this works: `big_cluster()` starts `mqnamesrv` and two `mqbroker` processes (broker sets
``bench-a`` and ``bench-b``, masters of one cluster) and fills them: every topic has 4 queues
on each broker set; every group has its retry topic on both (as a consumer's first
heartbeat makes it, so the name server lists the group), committed offsets on queue 0 of
its topic on both, and one unconsumed message there (a backlog with a time lag); the
first BENCH_DLQ groups have a dead-letter topic holding two messages.  `Heartbeats` keeps
BENCH_ONLINE groups' consumers online: ten client ids, each on a connection of its own,
send HEART_BEAT for their share of the groups every 20 s from a thread of their own, so the
brokers see them as Apache's clients would be seen.

    python -m benchmarks.big_cluster     # fill one and keep it; the benchmarks take -n ADDR
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from benchmarks.bench_client import namesrv_process
from benchmarks.processes import broker_process
from engine.client import ClientConfig, Message, MessageQueue, Producer
from engine.client.admin.cluster import MQAdmin
from engine.client.core.client_api import ClientAPI
from engine.client.core.errors import ClientError
from engine.client.produce.producer_options import ProducerOptions
from engine.protocol.body.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    SubscriptionData,
)
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.body.topic import TopicConfig
from engine.remoting.client import RemotingClient

TOPICS = int(os.environ.get("BENCH_TOPICS", "10000"))
GROUPS = int(os.environ.get("BENCH_GROUPS", "3000"))
ONLINE = int(os.environ.get("BENCH_ONLINE", "300"))
DLQ_GROUPS = int(os.environ.get("BENCH_DLQ", "100"))
BROKER_SETS = ("bench-a", "bench-b")
QUEUES_PER_BROKER = 4
CLIENTS = 10
HEARTBEAT_EVERY = 20.0
CONCURRENCY = 32
#: Seconds a request of the set-up may take (the machine may be busy with other work).
SETUP_TIMEOUT = 60.0


def topic_name(i: int) -> str:
    return f"BigTopic{i:05d}"


def group_name(i: int) -> str:
    return f"big-group-{i:04d}"


def topic_of(group: int) -> str:
    return topic_name(group % TOPICS)


@dataclass(frozen=True, slots=True)
class Cluster:
    namesrv: str
    brokers: dict[str, str]  # broker set name -> master address

    def describe(self) -> str:
        return (f"{TOPICS} topics x {QUEUES_PER_BROKER * len(self.brokers)} queues, "
                f"{GROUPS} groups ({ONLINE} with consumers online, {DLQ_GROUPS} with dead "
                f"letters), {len(self.brokers)} broker sets")


@contextlib.contextmanager
def big_cluster() -> Iterator[Cluster]:
    """Yields a populated cluster whose online groups keep heartbeating."""
    with namesrv_process() as ns, contextlib.ExitStack() as stack:
        brokers = {name: stack.enter_context(broker_process(namesrvAddr=ns, brokerName=name))
                   for name in BROKER_SETS}
        cluster = Cluster(ns, brokers)
        began = time.perf_counter()
        asyncio.run(populate(cluster))
        heartbeats = Heartbeats(cluster)
        heartbeats.start()
        try:
            asyncio.run(wait_online(cluster))
            print(f"populated {cluster.describe()} in {time.perf_counter() - began:.0f} s; "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
            yield cluster
        finally:
            heartbeats.stop()


async def populate(cluster: Cluster) -> None:
    gate = asyncio.Semaphore(CONCURRENCY)
    addrs = list(cluster.brokers.values())
    async with MQAdmin(cluster.namesrv, timeout=SETUP_TIMEOUT) as admin:
        async def topic(name: str, queues: int) -> None:
            async with gate:
                for addr in addrs:
                    await admin.broker.create_topic(addr, TopicConfig(name, queues, queues))

        async def group(i: int) -> None:
            name = group_name(i)
            async with gate:
                for addr in addrs:
                    await admin.broker.create_group(addr, SubscriptionGroupConfig(name))
                    await admin.broker.create_topic(addr, TopicConfig(f"%RETRY%{name}", 1, 1))
                    await admin.broker.update_consumer_offset(addr, name, topic_of(i), 0, 0)

        await asyncio.gather(*(topic(topic_name(i), QUEUES_PER_BROKER) for i in range(TOPICS)))
        await asyncio.gather(*(group(i) for i in range(GROUPS)))
        await asyncio.gather(*(topic(f"%DLQ%{group_name(i)}", 1) for i in range(DLQ_GROUPS)))
        wanted = TOPICS + GROUPS + DLQ_GROUPS
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # the brokers register their topics
            with contextlib.suppress(ClientError):
                if len((await admin.namesrv.all_topics()).topic_list) >= wanted:
                    break
            await asyncio.sleep(1)
        else:
            raise SystemExit("the name server never listed every topic")
    producer = Producer("BENCH_BIG_PG", ClientConfig(
        namesrv_addr=cluster.namesrv, mq_client_api_timeout=int(SETUP_TIMEOUT * 1000)),
        options=ProducerOptions(send_msg_timeout=int(SETUP_TIMEOUT * 1000)))
    await producer.start()
    try:
        async def send(topic: str, broker: str) -> None:
            async with gate:
                await producer.send_to_queue(Message(topic, b"x" * 100),
                                             MessageQueue(topic, broker, 0))

        # one message a group's topic on each broker set (behind the offset committed at 0),
        # two in each dead-letter topic
        topics = sorted({topic_of(i) for i in range(GROUPS)})
        await asyncio.gather(*(send(t, b) for t in topics for b in cluster.brokers))
        first = next(iter(cluster.brokers))
        await asyncio.gather(*(send(f"%DLQ%{group_name(i)}", first)
                               for i in range(DLQ_GROUPS) for _ in range(2)))
    finally:
        await producer.shutdown()


def heartbeat_data(client: int) -> HeartbeatData:
    groups = range(client, ONLINE, CLIENTS)
    consumers = frozenset(
        ConsumerData(group_name(i), ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
                     ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                     frozenset({SubscriptionData.build(topic_of(i), "*", sub_version=1)}))
        for i in groups)
    return HeartbeatData(f"127.0.0.1@bench-{client}", consumer_data_set=consumers)


class Heartbeats:
    """ONLINE groups' consumers, kept online by HEART_BEAT from a thread of their own."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-heartbeats", daemon=True)
        self._sent = threading.Event()

    def start(self) -> None:
        self._thread.start()
        if not self._sent.wait(60):
            raise SystemExit("the first heartbeats were not answered")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        asyncio.run(self._beat())

    async def _beat(self) -> None:
        remotes = [RemotingClient(connect_timeout=SETUP_TIMEOUT) for _ in range(CLIENTS)]
        apis = [ClientAPI(r, SETUP_TIMEOUT) for r in remotes]
        data = [heartbeat_data(c) for c in range(CLIENTS)]
        try:
            while not self._stop.is_set():
                await asyncio.gather(*(api.heartbeat(addr, d)
                                       for api, d in zip(apis, data, strict=True)
                                       for addr in self.cluster.brokers.values()))
                self._sent.set()
                for _ in range(int(HEARTBEAT_EVERY * 10)):
                    if self._stop.is_set():
                        break
                    await asyncio.sleep(0.1)
        finally:
            for r in remotes:
                await r.close()


async def wait_online(cluster: Cluster) -> None:
    """Until the last online group's consumer is known to every broker set."""
    async with MQAdmin(cluster.namesrv, timeout=SETUP_TIMEOUT) as admin:
        for addr in cluster.brokers.values():
            for _ in range(300):
                with contextlib.suppress(ClientError):
                    if ONLINE == 0 or await admin.broker.consumer_ids(
                            addr, group_name(ONLINE - 1)):
                        break
                await asyncio.sleep(0.1)


async def existing(namesrv: str) -> Cluster:
    """Another cluster (Apache's, say) to fill: its masters, by broker set."""
    async with MQAdmin(namesrv) as admin:
        return Cluster(namesrv, await admin.master_addrs())


def main() -> None:
    """Start and fill the cluster, print its name server, keep it until interrupted (then
    ``python -m benchmarks.bench_dashboard -n ADDR`` and the others measure it)."""
    import signal

    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with big_cluster() as cluster:
        print(f"namesrv {cluster.namesrv}  brokers {cluster.brokers}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()

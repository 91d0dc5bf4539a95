"""Demo traffic for the dev cluster: ``python -m mqadmin.dev.traffic -n HOST:PORT``.

How this works: one process, one event loop, one `RemotingClient` that also answers the
calls brokers relay to consumers (running info, status, offset resets), so consumerStatus
and resetOffsetByTime work against it.  A producer sends orders to DemoOrders (keys
``order-N``, tags TagA/TagB/TagC) and every third tick a payment to DemoPayments.  Group
``demo-consumer`` consumes DemoOrders and its retry topic and fails every order whose key
ends in 7: those go back to the broker (CONSUMER_SEND_MSG_BACK), are retried after the dev
broker's short delay levels and, after the group's two retries, land in
``%DLQ%demo-consumer``.  Group ``demo-laggard`` takes one payment every two seconds, fewer
than are sent, so it lags.  Both heartbeat to every broker and commit their offsets.
SIGTERM stops the process after unregistering the clients.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.client.admin import MQAdmin
from engine.client.errors import ClientError, QueryNotFoundError
from engine.protocol import fastjson
from engine.protocol.body.admin import (
    ConsumerRunningInfo,
    ConsumeStatus,
    GetConsumerStatusBody,
    ProcessQueueInfo,
    ResetOffsetBody,
)
from engine.protocol.body.heartbeat import SubscriptionData
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.codes import RequestCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.header.broker import UnregisterClientRequestHeader
from engine.protocol.message import MessageRecord
from engine.protocol.wire import from_json, to_ext, to_json
from engine.remoting import loop
from engine.remoting.client import RemotingClient
from engine.remoting.router import RequestContext, Router
from mqadmin.operations.messaging import PRODUCER_GROUP, heartbeat, pull, send_back
from mqadmin.operations.produce import Producer
from mqadmin.operations.targets import retry_topic

HEARTBEAT_EVERY = 10.0
ROUTES_EVERY = 10.0
TAGS = ("TagA", "TagB", "TagC")


@dataclass(slots=True)
class Consumer:
    """A push-style consumer group driven by pulls: offsets per queue, a failure rule."""

    group: str
    topics: list[str]
    fails: Callable[[MessageRecord], bool]
    max_per_round: int | None = None
    max_retries: int = 2
    offsets: dict[MessageQueue, int] = field(default_factory=dict)
    addrs: dict[str, str] = field(default_factory=dict)  # broker name -> master address
    consumed: int = 0
    failed: int = 0
    turn: int = 0  # the queue a round starts with, so a budget reaches every queue
    started: float = field(default_factory=time.time)

    @property
    def subscribed(self) -> list[str]:
        return [*self.topics, retry_topic(self.group)]

    async def refresh(self, admin: MQAdmin) -> None:
        """Learn the queues of the topics (new ones start at the committed offset)."""
        for topic in self.subscribed:
            try:
                route = await admin.namesrv.topic_route(topic)
            except ClientError:
                continue
            masters = {d.broker_name: a for d in route.broker_datas
                       if (a := d.master_addr()) is not None}
            self.addrs.update(masters)
            for q in route.queue_datas:
                if q.broker_name not in masters:
                    continue
                for i in range(q.read_queue_nums):
                    mq = MessageQueue(topic, q.broker_name, i)
                    if mq not in self.offsets:
                        self.offsets[mq] = await self._start(admin, mq)

    async def _start(self, admin: MQAdmin, mq: MessageQueue) -> int:
        addr = self.addrs[mq.broker_name]
        try:
            return await admin.broker.consumer_offset(addr, self.group, mq.topic, mq.queue_id)
        except QueryNotFoundError:
            return await admin.broker.min_offset(addr, mq.topic, mq.queue_id)

    async def round(self, admin: MQAdmin) -> None:
        """Pull every queue once, consume (or fail) what came, commit the offsets."""
        budget = self.max_per_round
        queues = list(self.offsets.items())
        self.turn = (self.turn + 1) % max(len(queues), 1)
        for mq, offset in queues[self.turn:] + queues[:self.turn]:
            if budget is not None and budget <= 0:
                return
            addr = self.addrs.get(mq.broker_name)
            if addr is None:
                continue
            result = await pull(admin.client, addr, mq.topic, mq.queue_id, offset,
                                max_nums=budget or 16, group=self.group,
                                broker_name=mq.broker_name)
            if result.next_begin_offset == offset:
                continue
            for record in result.messages:
                if self.fails(record):
                    self.failed += 1
                    await send_back(admin.client, addr, record, self.group,
                                    max_reconsume_times=self.max_retries)
                else:
                    self.consumed += 1
            if budget is not None:
                budget -= len(result.messages)
            self.offsets[mq] = result.next_begin_offset
            await admin.broker.update_consumer_offset(addr, self.group, mq.topic, mq.queue_id,
                                                      result.next_begin_offset)

    def running_info(self, client_id: str) -> ConsumerRunningInfo:
        elapsed = max(time.time() - self.started, 1.0)
        status = ConsumeStatus(consume_ok_tps=self.consumed / elapsed,
                               consume_failed_tps=self.failed / elapsed,
                               consume_failed_msgs=self.failed)
        return ConsumerRunningInfo(
            properties={"consumeType": "CONSUME_PASSIVELY", "clientId": client_id,
                        "consumerGroup": self.group, "messageModel": "CLUSTERING"},
            subscription_set=[SubscriptionData.build(t, "*") for t in self.subscribed],
            mq_table={mq: ProcessQueueInfo(commit_offset=o) for mq, o in self.offsets.items()},
            status_table={t: status for t in self.topics})


def _router(consumers: dict[str, Consumer], client_id: str) -> Router:
    router = Router()

    @router.handles(RequestCode.GET_CONSUMER_RUNNING_INFO)
    def running(ctx: RequestContext[None], cmd: RemotingCommand) -> RemotingCommand:
        consumer = consumers.get(cmd.ext("consumerGroup") or "")
        if consumer is None:
            return cmd.response(1, "no such group in this client")
        info = consumer.running_info(client_id)
        return cmd.response(body=fastjson.dumpb(to_json(info)))

    @router.handles(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT)
    def status(ctx: RequestContext[None], cmd: RemotingCommand) -> RemotingCommand:
        consumer = consumers.get(cmd.ext("group") or "")
        topic = cmd.ext("topic")
        table = {mq: o for mq, o in (consumer.offsets if consumer else {}).items()
                 if mq.topic == topic}
        return cmd.response(body=fastjson.dumpb(to_json(GetConsumerStatusBody(table))))

    @router.handles(RequestCode.RESET_CONSUMER_CLIENT_OFFSET)
    def reset(ctx: RequestContext[None], cmd: RemotingCommand) -> None:
        consumer = consumers.get(cmd.ext("group") or "")
        if consumer is not None and cmd.body:
            body = from_json(ResetOffsetBody, fastjson.loads(cmd.body))
            consumer.offsets.update(body.offset_table)

    @router.handles(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
    def changed(ctx: RequestContext[None], cmd: RemotingCommand) -> None:
        return None

    return router


async def _brokers(admin: MQAdmin) -> list[str]:
    info = await admin.namesrv.cluster_info()
    return [a for d in info.broker_addr_table.values() for a in d.broker_addrs.values()]


async def _heartbeats(admin: MQAdmin, consumers: dict[str, Consumer], client_id: str) -> None:
    for addr in await _brokers(admin):
        for consumer in consumers.values():
            with contextlib.suppress(ClientError):
                await heartbeat(admin.client, addr, client_id, consumer_group=consumer.group,
                                topics={t: "*" for t in consumer.subscribed},
                                producer_group=PRODUCER_GROUP)


async def _unregister(admin: MQAdmin, consumers: dict[str, Consumer], client_id: str) -> None:
    for addr in await _brokers(admin):
        for consumer in consumers.values():
            header = UnregisterClientRequestHeader(client_id, PRODUCER_GROUP, consumer.group)
            with contextlib.suppress(ClientError, OSError, TimeoutError):
                await admin.client.invoke(addr, request(RequestCode.UNREGISTER_CLIENT,
                                                        to_ext(header)), 2.0)


def _fails(record: MessageRecord) -> bool:
    return any(k.endswith("7") for k in record.keys)


async def run(namesrv: str, rate: float, stop: asyncio.Event) -> None:
    client_id = f"127.0.0.1@demo-{os.getpid()}"
    consumers = {
        "demo-consumer": Consumer("demo-consumer", ["DemoOrders"], _fails),
        "demo-laggard": Consumer("demo-laggard", ["DemoPayments"], lambda r: False,
                                 max_per_round=1),
    }
    client = RemotingClient(_router(consumers, client_id), None)
    admin = MQAdmin(namesrv, client=client)
    try:
        orders = await Producer.of(admin, "DemoOrders")
        payments = await Producer.of(admin, "DemoPayments")
        loop_time = asyncio.get_running_loop().time
        next_beat = next_routes = 0.0
        last_laggard = 0.0
        n = 0
        while not stop.is_set():
            now = loop_time()
            if now >= next_beat:
                await _heartbeats(admin, consumers, client_id)
                next_beat = now + HEARTBEAT_EVERY
            if now >= next_routes:
                for consumer in consumers.values():
                    await consumer.refresh(admin)
                next_routes = now + ROUTES_EVERY
            n += 1
            with contextlib.suppress(ClientError):
                body = json.dumps({"order": n, "amount": n % 97, "at": time.time()}).encode()
                await orders.send(body, tags=TAGS[n % len(TAGS)], keys=f"order-{n}")
                if n % 3 == 0:
                    await payments.send(body, tags="Paid", keys=f"payment-{n}")
            with contextlib.suppress(ClientError):
                await consumers["demo-consumer"].round(admin)
                if now - last_laggard >= 2.0:
                    await consumers["demo-laggard"].round(admin)
                    last_laggard = now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1 / rate)
        await _unregister(admin, consumers, client_id)
    finally:
        await client.close()


async def _main(namesrv: str, rate: float) -> None:
    stop = asyncio.Event()
    running = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        running.add_signal_handler(sig, stop.set)
    while not stop.is_set():
        try:
            await run(namesrv, rate, stop)
        except Exception as exc:  # the cluster restarts, a broker is away: try again soon
            print(f"demo traffic: {type(exc).__name__}: {exc}; retrying in 2 s",
                  file=sys.stderr, flush=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 2.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mqadmin-dev-traffic",
                                     description="Demo traffic for `mqadmin dev up`.")
    parser.add_argument("-n", "--namesrvAddr", required=True, help="name server host:port")
    parser.add_argument("--data-dir", help="the dev cluster's data directory (marks the "
                                           "process as the cluster's)")
    parser.add_argument("--rate", type=float, default=5.0, help="orders a second")
    args = parser.parse_args(argv)
    loop.run(_main(args.namesrvAddr, max(args.rate, 0.1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

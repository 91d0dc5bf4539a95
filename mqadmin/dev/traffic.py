"""Demo traffic for the dev cluster: ``python -m mqadmin.dev.traffic -n HOST:PORT``.

How this works: `engine.client`'s producer and push consumers, as an application would run
them, so the traffic follows the cluster through restarts, `mqadmin switchover` and
`failover` (routes are refreshed every few seconds and after a failed send, sends are
retried).  The producer sends orders to DemoOrders (keys ``order-N``, tags TagA/TagB/TagC,
JSON bodies) and every third tick a payment to DemoPayments.  Group ``demo-consumer``
consumes DemoOrders and fails an order whose key ends in 7 on its first `FAILED_DELIVERIES`
deliveries: after the group's two retries it lands in ``%DLQ%demo-consumer``, and a redrive
(`mqadmin dlq resend`, or a CONSUME_MESSAGE_DIRECTLY from a dashboard) is a later delivery,
which succeeds.  Group ``demo-laggard`` takes one payment every two seconds, fewer than are
sent, so it lags.  Send and consume errors go to stderr (the process's log) with a time;
every minute a summary line says what was sent, consumed and failed.  With `--grpc`, group
``demo-grpc`` consumes DemoPayments with the official RocketMQ 5 Python client
(rocketmq-python-client) through the brokers' gRPC proxies, as a 5.x application would.
The orders consumer deduplicates by order key (`Dedupe`, docs/client.md): a redelivery or
an `--again` redrive of an order already consumed is acknowledged without running it twice.
SIGTERM or SIGINT stop it after the clients unregister.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.client import (
    ClientConfig,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumerOptions,
    Message,
    MessageExt,
    Producer,
    ProducerOptions,
    PushConsumer,
)
from engine.client.consume.dedupe import Dedupe
from engine.client.consume.dedupe_sqlite import SqliteKeyStore
from engine.protocol.signature import Credentials
from engine.remoting import loop
from mqadmin.dev.access import read_app_credentials

log = logging.getLogger("mqadmin.dev.traffic")

TAGS = ("TagA", "TagB", "TagC")
PRODUCER_GROUP = "demo-producer"
FAILED_DELIVERIES = 3  # the first three deliveries of a poison order fail: 1 + 2 retries
MAX_RETRIES = 2
LAGGARD_PAUSE = 2.0
SUMMARY_EVERY = 60.0
REMEMBERED = 100_000  # poison keys remembered (their delivery counts)
KEYS_DB = "consumed-keys.db"
GRPC_GROUP = "demo-grpc"  # the orders consumer's record of consumed order keys


@dataclass(slots=True)
class Counts:
    sent: int = 0
    send_errors: int = 0
    consumed: int = 0
    failed: int = 0
    redriven: int = 0
    grpc_consumed: int = 0


@dataclass(slots=True)
class PoisonRule:
    """Fail an order whose key ends in 7 on its first `times` deliveries."""

    times: int = FAILED_DELIVERIES
    seen: OrderedDict[str, int] = field(default_factory=OrderedDict)

    def fails(self, msg: MessageExt) -> bool:
        key = next((k for k in msg.keys if k.endswith("7")), None)
        if key is None:
            return False
        n = self.seen.pop(key, 0) + 1
        if n > self.times:
            return False
        self.seen[key] = n
        if len(self.seen) > REMEMBERED:
            self.seen.popitem(last=False)
        return True


#: The demo application's key (`--credentials`, access control on), None when open.
CREDENTIALS: Credentials | None = None


def _config(namesrv: str, name: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv, instance_name=name,
                        poll_name_server_interval=5_000, heartbeat_broker_interval=10_000,
                        persist_consumer_offset_interval=2_000, rebalance_interval=5_000,
                        credentials=CREDENTIALS)


def order_consumer(namesrv: str, counts: Counts, rule: PoisonRule, *,
                   group: str = "demo-consumer", max_retries: int = MAX_RETRIES,
                   dedupe: Dedupe | None = None) -> PushConsumer:
    """The orders consumer; with `dedupe` it runs each order key once (docs/client.md)."""
    consumer = PushConsumer(group, _config(namesrv, "demo-orders"),
                            options=ConsumerOptions(max_reconsume_times=max_retries,
                                                    dedupe=dedupe, enable_trace=True))

    def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                 ) -> ConsumeConcurrentlyStatus:
        for msg in msgs:
            if rule.fails(msg):
                counts.failed += 1
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            counts.consumed += 1
            if any(k.endswith("7") for k in msg.keys):
                counts.redriven += 1
                log.info("%s consumed after a redrive (msgId %s)",
                         " ".join(msg.keys), msg.msg_id)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.subscribe("DemoOrders", "*")
    consumer.register_concurrently(listener)
    return consumer


def laggard(namesrv: str, counts: Counts) -> PushConsumer:
    consumer = PushConsumer("demo-laggard", _config(namesrv, "demo-laggard"),
                            options=ConsumerOptions(consume_thread_max=1, enable_trace=True,
                                                    pull_threshold_for_queue=16,
                                                    await_termination_millis=1_000))

    async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                       ) -> ConsumeConcurrentlyStatus:
        await asyncio.sleep(LAGGARD_PAUSE * len(msgs))
        counts.consumed += len(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.subscribe("DemoPayments", "*")
    consumer.register_concurrently(listener)
    return consumer


def grpc_consumer(endpoints: str, counts: Counts) -> Any | None:
    """Group demo-grpc: a 5.x PushConsumer of DemoPayments through the gRPC proxies (None,
    with a warning, where the 5.x client is not installed)."""
    try:
        from rocketmq.v5.client import ClientConfiguration
        from rocketmq.v5.client import Credentials as GrpcCredentials
        from rocketmq.v5.client.client import Client
        from rocketmq.v5.consumer import ConsumeResult, MessageListener, PushConsumer
        from rocketmq.v5.model import FilterExpression
    except ImportError:
        log.warning("group %s left out: rocketmq-python-client is not installed", GRPC_GROUP)
        return None

    class Listener(MessageListener):  # type: ignore[misc]
        def consume(self, message: object) -> object:
            counts.grpc_consumed += 1
            return ConsumeResult.SUCCESS

    class MeteredOnlyWhenOn(PushConsumer):  # type: ignore[misc]
        """5.1.2's PushConsumer registers its cache gauges on every settings answer, on a
        meter provider that exists only while the proxy turns metrics on: with metrics off
        (Apache 5.3.3's proxy without an exporter, and ours by default) that raised
        AttributeError in the client's telemetry reader, which then stopped reading the
        proxy's answers and commands."""

        def reset_metric(self, metric: Any) -> None:
            if metric.on:
                super().reset_metric(metric)
            else:  # the client's own switch-off, without the gauges
                Client.reset_metric(self, metric)

    keys = (GrpcCredentials(CREDENTIALS.access_key, CREDENTIALS.secret_key)
            if CREDENTIALS is not None else GrpcCredentials())
    return MeteredOnlyWhenOn(ClientConfiguration(endpoints, keys), GRPC_GROUP, Listener(),
                             {"DemoPayments": FilterExpression("*")})


async def _send(producer: Producer, msg: Message, counts: Counts) -> None:
    try:
        await producer.send(msg)
        counts.sent += 1
    except Exception as exc:  # every failure is logged and the traffic goes on
        counts.send_errors += 1
        log.error("send to %s failed: %s: %s", msg.topic, type(exc).__name__, exc)


async def run(namesrv: str, rate: float, stop: asyncio.Event,
              data_dir: Path | None = None, grpc: str | None = None) -> None:
    """Produce and consume until `stop` is set; with `data_dir`, the orders consumer
    records consumed order keys in `data_dir`/traffic/consumed-keys.db."""
    counts = Counts()
    producer = Producer(PRODUCER_GROUP, _config(namesrv, "demo-producer"),
                        options=ProducerOptions(enable_trace=True))
    store = None if data_dir is None else SqliteKeyStore(data_dir / "traffic" / KEYS_DB)
    consumers = [order_consumer(namesrv, counts, PoisonRule(),
                                dedupe=None if store is None else Dedupe(store)),
                 laggard(namesrv, counts)]
    await producer.start()
    for consumer in consumers:
        await consumer.start()
    five = grpc_consumer(grpc, counts) if grpc else None
    if five is not None:
        try:
            await asyncio.to_thread(five.startup)
        except Exception as exc:  # the proxies are not up yet: the 4.x traffic goes on
            log.error("group %s did not start: %s: %s", GRPC_GROUP, type(exc).__name__, exc)
            five = None
    clock = asyncio.get_running_loop().time
    next_summary = clock() + SUMMARY_EVERY
    n = 0
    try:
        while not stop.is_set():
            n += 1
            body = json.dumps({"order": n, "amount": n % 97, "at": time.time()}).encode()
            await _send(producer, Message("DemoOrders", body, tags=TAGS[n % len(TAGS)],
                                          keys=f"order-{n}"), counts)
            if n % 3 == 0:
                await _send(producer, Message("DemoPayments", body, tags="Paid",
                                              keys=f"payment-{n}"), counts)
            if clock() >= next_summary:
                log.warning("sent %d (%d send errors), consumed %d, failed %d, redriven %d, "
                            "consumed over gRPC %d", counts.sent, counts.send_errors,
                            counts.consumed, counts.failed, counts.redriven,
                            counts.grpc_consumed)
                next_summary = clock() + SUMMARY_EVERY
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1 / rate)
    finally:  # all at once, so SIGTERM ends the process well within `dev down`'s timeout
        await asyncio.gather(*(c.shutdown() for c in consumers), producer.shutdown(),
                             *([asyncio.to_thread(five.shutdown)] if five is not None else []),
                             return_exceptions=True)
        if store is not None:
            await store.close()


async def _main(namesrv: str, rate: float, data_dir: Path | None, grpc: str | None) -> None:
    stop = asyncio.Event()
    running = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        running.add_signal_handler(sig, stop.set)
    while not stop.is_set():
        try:
            await run(namesrv, rate, stop, data_dir, grpc)
        except Exception as exc:  # the name server is away at start: try again soon
            log.error("demo traffic: %s: %s; retrying in 2 s", type(exc).__name__, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 2.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mqadmin-dev-traffic",
                                     description="Demo traffic for `mqadmin dev up`.")
    parser.add_argument("-n", "--namesrvAddr", required=True, help="name server host:port")
    parser.add_argument("--data-dir", help="the dev cluster's data directory (marks the "
                                           "process as the cluster's)")
    parser.add_argument("--rate", type=float, default=5.0, help="orders a second")
    parser.add_argument("--grpc", help="the gRPC proxies' endpoints (host:port;host:port): "
                                       f"group {GRPC_GROUP} consumes over gRPC")
    parser.add_argument("--credentials", help="JSON file with the accessKey and secretKey to "
                                              "sign with (the dev cluster's demo-app user)")
    args = parser.parse_args(argv)
    if args.credentials:
        global CREDENTIALS
        CREDENTIALS = read_app_credentials(args.credentials)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)
    data_dir = Path(args.data_dir) if args.data_dir else None
    loop.run(_main(args.namesrvAddr, max(args.rate, 0.1), data_dir, args.grpc))
    return 0


if __name__ == "__main__":
    sys.exit(main())

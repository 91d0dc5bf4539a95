"""Long-polling receives under load: is every ReceiveMessage answered by its await time and
before its gRPC deadline?

Sixteen SimpleConsumers, each in a group of its own, on four topics and groups created a
moment before the run, each with five receives in flight as the 5.x SimpleConsumer makes
them (`receiveAsync(32, 10 s)`: batch 32, invisible 10 s, long polling `AWAIT_S`, gRPC
deadline await + the client's 3 s request timeout; every message received is acked), while
producers send to the four topics at a steady rate.  Raw generated grpc.aio stubs in this
process play the clients, each consumer with its Telemetry settings first, as a client does.

Each load runs twice, on fresh topics and groups: once as the Java client receives (no
`long_polling_timeout`: the proxy polls the time left less half the request timeout, 5.3.3's
rule, so an empty receive ends about 1.5 s after the await time), once as the Python client
does (`long_polling_timeout` = the await time).  For every receive: how long after its await
time it was answered (answer - start - await; negative when messages came before it), p50 /
p95 / max, the answers more than a second after the await time, the answers after the gRPC
deadline (DEADLINE_EXCEEDED on the client) and how close to it the slowest came, and the
statuses seen.  Runs ours (`mqbroker --enable-proxy` in its own process, local
mode); with `APACHE_RMQ5_HOME` (an Apache 5.3.3 build) the same load against Apache's own
`mqbroker --enable-proxy`, one after the other.  `--endpoint HOST:PORT --broker HOST:PORT`
runs it against servers already up.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from benchmarks.machine import machine, percentile
from benchmarks.processes import cpu_seconds, free_port, namesrv_in_thread, wait_listening
from engine.client.admin.broker import BrokerAdmin
from engine.protocol.body.topic import TopicConfig
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient

CONSUMERS = 16
IN_FLIGHT = 5  # receives in flight per consumer
TOPICS = 4
QUEUES = 8
BATCH = 32
INVISIBLE_S = 10
AWAIT_S = 5
REQUEST_TIMEOUT_S = 3  # the 5.x clients' default; a receive's deadline is await + this
SEND_RATE = 200  # messages per second per topic
SECONDS = 20.0
BODY = b"x" * 256


def _headers(client_id: str) -> tuple[tuple[str, str], ...]:
    return (("x-mq-client-id", client_id), ("x-mq-language", "JAVA"),
            ("x-mq-client-version", "5.0.3"), ("x-mq-protocol", "GRPC_V2"))


@dataclass(frozen=True, slots=True)
class Load:
    rate: float = SEND_RATE  # messages per second per topic
    seconds: float = SECONDS


@dataclass
class Results:
    late_s: list[float] = field(default_factory=list)  # answer - start - await
    statuses: collections.Counter[str] = field(default_factory=collections.Counter)
    after_deadline: int = 0
    received: int = 0
    sent: int = 0


async def create_topics(broker: str, names: list[str]) -> None:
    client = RemotingClient()
    try:
        for name in names:
            await BrokerAdmin(client).create_topic(broker, TopicConfig(name, QUEUES, QUEUES))
    finally:
        await client.close()


async def _settings(stub: service_pb2_grpc.MessagingServiceStub, client_id: str, group: str,
                    topic: str) -> grpc.aio.StreamStreamCall[spb.TelemetryCommand,
                                                             spb.TelemetryCommand]:
    settings = pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=pb.Subscription(
        group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(
            topic=pb.Resource(name=topic),
            expression=pb.FilterExpression(type=pb.TAG, expression="*"))]))
    settings.request_timeout.FromSeconds(REQUEST_TIMEOUT_S)
    settings.subscription.long_polling_timeout.FromSeconds(AWAIT_S)
    call = stub.Telemetry(metadata=_headers(client_id))
    await call.write(spb.TelemetryCommand(settings=settings))
    await call.read()
    return call


async def _receive_loop(stub: service_pb2_grpc.MessagingServiceStub, client_id: str,
                        group: str, topic: str, stop_at: float, out: Results,
                        java: bool) -> None:
    req = spb.ReceiveMessageRequest(
        group=pb.Resource(name=group), batch_size=BATCH, auto_renew=False,
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"))
    req.invisible_duration.FromSeconds(INVISIBLE_S)
    if not java:  # the Java client sends none: the proxy derives it from the deadline
        req.long_polling_timeout.FromSeconds(AWAIT_S)
    headers = _headers(client_id)
    while time.monotonic() < stop_at:
        entries = []
        code = "?"
        t0 = time.monotonic()
        try:
            async for resp in stub.ReceiveMessage(req, metadata=headers,
                                                  timeout=AWAIT_S + REQUEST_TIMEOUT_S):
                which = resp.WhichOneof("content")
                if which == "status":
                    code = pb.Code.Name(resp.status.code)
                elif which == "message":
                    props = resp.message.system_properties
                    entries.append(spb.AckMessageEntry(message_id=props.message_id,
                                                       receipt_handle=props.receipt_handle))
        except grpc.aio.AioRpcError as exc:
            code = f"gRPC {exc.code().name}"
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                out.after_deadline += 1
        out.late_s.append(time.monotonic() - t0 - AWAIT_S)
        out.statuses[code] += 1
        if entries:
            out.received += len(entries)
            await stub.AckMessage(spb.AckMessageRequest(
                group=pb.Resource(name=group), topic=pb.Resource(name=topic), entries=entries),
                metadata=headers, timeout=REQUEST_TIMEOUT_S)
        elif code not in ("OK", "MESSAGE_NOT_FOUND"):
            await asyncio.sleep(0.2)  # as the client's backoff after a failed receive


async def _produce(stub: service_pb2_grpc.MessagingServiceStub, topic: str, rate: float,
                   stop_at: float, out: Results) -> None:
    n = 0
    start = time.monotonic()
    headers = _headers(f"bench-producer-{topic}")
    while time.monotonic() < stop_at:
        msg = pb.Message(topic=pb.Resource(name=topic), body=BODY)
        msg.system_properties.message_id = f"01DL{topic[-4:]}{n:024X}"
        answer = await stub.SendMessage(spb.SendMessageRequest(messages=[msg]), metadata=headers,
                                        timeout=REQUEST_TIMEOUT_S)
        if answer.status.code == pb.OK:
            out.sent += 1
        n += 1
        ahead = start + n / rate - time.monotonic()
        if ahead > 0:
            await asyncio.sleep(ahead)


async def run_load(endpoint: str, broker: str, label: str, pid: int | None, load: Load,
                   java: bool) -> None:
    tag = f"{int(time.time() * 1000) % 10**8:08d}"
    topics = [f"DlTopic{tag}{k}" for k in range(TOPICS)]
    await create_topics(broker, topics)  # fresh topics and groups, a moment before the load
    out = Results()
    channels = [grpc.aio.insecure_channel(endpoint) for _ in range(CONSUMERS + 1)]
    try:
        stubs = [service_pb2_grpc.MessagingServiceStub(c) for c in channels]
        consumers = [(f"bench-consumer-{tag}-{k}", f"DlGroup{tag}{k}", topics[k % TOPICS])
                     for k in range(CONSUMERS)]
        for _ in range(100):  # the proxy finds the routes of topics that new
            route = await stubs[0].QueryRoute(spb.QueryRouteRequest(
                topic=pb.Resource(name=topics[-1])), metadata=_headers("bench-route"),
                timeout=REQUEST_TIMEOUT_S)
            if route.status.code == pb.OK:
                break
            await asyncio.sleep(0.1)
        streams = [await _settings(stubs[k], cid, group, topic)
                   for k, (cid, group, topic) in enumerate(consumers)]
        stop_at = time.monotonic() + load.seconds
        cpu0 = cpu_seconds(pid) if pid else float("nan")
        await asyncio.gather(
            *(_receive_loop(stubs[k], cid, group, topic, stop_at, out, java)
              for k, (cid, group, topic) in enumerate(consumers) for _ in range(IN_FLIGHT)),
            *(_produce(stubs[-1], topic, load.rate, stop_at, out) for topic in topics))
        cpu = (cpu_seconds(pid) - cpu0) if pid else float("nan")
        for stream in streams:
            await stream.done_writing()
    finally:
        for channel in channels:
            await channel.close()
    late = out.late_s
    style = ("as the Java client: no long_polling_timeout" if java else
             f"as the Python client: long_polling_timeout {AWAIT_S} s")
    print(f"{label}: {CONSUMERS} SimpleConsumers x {IN_FLIGHT} receives in flight "
          f"(batch {BATCH}, await {AWAIT_S} s, deadline +{REQUEST_TIMEOUT_S} s, {style}), {TOPICS} "
          f"fresh topics at {load.rate:g} msgs/s each, {load.seconds:.0f} s")
    print(f"  receives {len(late)}, messages sent {out.sent}, received {out.received}; "
          f"statuses {dict(out.statuses)}")
    print(f"  answer - await time: p50 {percentile(late, 50):+.3f} s, p95 "
          f"{percentile(late, 95):+.3f} s, max {max(late):+.3f} s; more than 1 s after the "
          f"await time: {sum(1 for x in late if x > 1.0)}; after the deadline: "
          f"{out.after_deadline} (the slowest answer {REQUEST_TIMEOUT_S - max(late):.3f} s "
          "before its deadline)")
    if pid:
        print(f"  server CPU {cpu / load.seconds * 100:.0f}% of one core, load average "
              f"{os.getloadavg()[0]:.2f}")


@contextmanager
def ours(tmp: str) -> Iterator[tuple[str, str, int]]:
    """A name server in this process's thread and `mqbroker --enable-proxy` as a process."""
    with namesrv_in_thread(tmp) as ns_addr:
        port, grpc_port = free_port(), free_port()
        root = Path(tmp, "ours")
        root.mkdir()
        (root / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in {
            "brokerName": "bench-ours", "brokerIP1": "127.0.0.1", "bindAddress": "127.0.0.1",
            "listenPort": port, "storePathRootDir": f"{root}/store", "logsDir": f"{root}/logs",
            "flushDiskType": "ASYNC_FLUSH", "namesrvAddr": ns_addr}.items()))
        (root / "rmq-proxy.json").write_text(json.dumps({"grpcServerPort": grpc_port}))
        proc = subprocess.Popen(
            [sys.executable, "-m", "engine.broker.main", "-c", str(root / "broker.conf"),
             "--enable-proxy", "-pc", str(root / "rmq-proxy.json")], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env={**os.environ, "HOME": str(root)})
        try:
            asyncio.run(wait_listening(grpc_port, proc))
            yield f"127.0.0.1:{grpc_port}", f"127.0.0.1:{port}", proc.pid
        finally:
            proc.terminate()
            proc.wait(60)


@contextmanager
def apache(home: str, tmp: str) -> Iterator[tuple[str, str, int]]:
    """Apache 5.3.3's name server and `mqbroker --enable-proxy`."""
    from benchmarks.bench_grpc import _java_pid

    ns_port, broker_port, grpc_port, remoting_port = (free_port(), free_port(), free_port(),
                                                      free_port())
    ns = f"127.0.0.1:{ns_port}"
    Path(tmp, "ns.conf").write_text(f"listenPort={ns_port}\n")
    Path(tmp, "broker.conf").write_text("\n".join([
        "brokerClusterName=BenchCluster", "brokerName=bench-apache", "brokerId=0",
        f"listenPort={broker_port}", "brokerIP1=127.0.0.1", f"namesrvAddr={ns}",
        f"storePathRootDir={tmp}/store", "flushDiskType=ASYNC_FLUSH", ""]))
    Path(tmp, "proxy.json").write_text(json.dumps({
        "rocketMQClusterName": "BenchCluster", "namesrvAddr": ns, "grpcServerPort": grpc_port,
        "remotingListenPort": remoting_port}))
    env = {**os.environ, "JAVA_OPT_EXT": f"-Duser.home={tmp}", "RMQ_HEAP": "-Xms512m -Xmx512m"}
    procs = [subprocess.Popen([f"{home}/mqnamesrv.sh", "-c", f"{tmp}/ns.conf"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)]
    try:
        asyncio.run(wait_listening(ns_port, procs[0]))
        procs.append(subprocess.Popen(
            [f"{home}/mqbroker.sh", "-n", ns, "-c", f"{tmp}/broker.conf", "--enable-proxy",
             "-pc", f"{tmp}/proxy.json"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=env))
        asyncio.run(wait_listening(grpc_port, procs[1]))
        time.sleep(5)  # the broker registers with its name server after the port opens
        yield f"127.0.0.1:{grpc_port}", f"127.0.0.1:{broker_port}", _java_pid(procs[1].pid)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            proc.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--endpoint", help="a running proxy's gRPC endpoint")
    parser.add_argument("--broker", help="its broker's remoting address (creates the topics)")
    parser.add_argument("--rate", type=float, default=SEND_RATE,
                        help=f"messages per second per topic (default {SEND_RATE})")
    parser.add_argument("--seconds", type=float, default=SECONDS,
                        help=f"length of a run (default {SECONDS:.0f})")
    args = parser.parse_args()
    load = Load(args.rate, args.seconds)
    print(machine())

    def both(endpoint: str, broker: str, label: str, pid: int | None) -> None:
        for java in (True, False):  # fresh topics and groups for each
            asyncio.run(run_load(endpoint, broker, label, pid, load, java))

    if args.endpoint:
        both(args.endpoint, args.broker, f"proxy at {args.endpoint}", None)
        return
    with tempfile.TemporaryDirectory() as tmp, ours(tmp) as (endpoint, broker, pid):
        both(endpoint, broker, "ours (mqbroker --enable-proxy)", pid)
    home = os.environ.get("APACHE_RMQ5_HOME")
    if home:
        with tempfile.TemporaryDirectory() as tmp, apache(home, tmp) as (endpoint, broker, pid):
            both(endpoint, broker, "Apache 5.3.3 (mqbroker --enable-proxy)", pid)

if __name__ == "__main__":
    main()

"""Sends, and receives + acks, of 1 KiB messages over gRPC through the proxy, many calls in flight.

Runs `mqbroker --enable-proxy` as its own process with the proxy's defaults (local mode, its
worker processes, our HTTP/2 front; the name server runs in this process and only answers
route lookups) and measures, with the targets of issue 25 (10,000 msgs/s each):

* one-message SendMessage calls driven by h2load (nghttp2's load generator, in C: the
  client then takes little of the two cores; skipped, saying so, where it is not
  installed), every message counted in the store afterwards; then the same calls from raw
  generated grpc.aio stubs in this process (a Python client, which costs about as much CPU
  per call as the server), 16 messages per call (one SEND_BATCH_MESSAGE), and the official
  client (`rocketmq-python-client`, 16 threads calling `send`, one blocking call each);
* receives and acks as the 5.x SimpleConsumer makes them (ReceiveMessage of a batch of 32,
  then one AckMessage of all it brought; many rounds in flight) of a topic filled for them
  beforehand, with `enableBatchAck=true` and then with 5.3's default (a second broker).

Beside each rate: the broker process's CPU per message (user + system, from /proc; its workers
are processes of their own, whose figures bench_grpc_workers gives), for h2load its busiest
thread's too, and the Python client's.  For scale, the same one-message calls against two
servers in a process of their own: a grpc.aio servicer that does nothing (grpc.aio's own cost
per call here, with the proxy's server options), and the proxy whose broker calls answer at once
(the proxy's own cost, without the broker and its store).  With `APACHE_RMQ5_HOME` (an Apache
5.3.3 build), the one-message calls also go to Apache's own `mqbroker --enable-proxy`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc

from benchmarks.machine import machine, percentile, summary
from benchmarks.processes import (
    cpu_seconds,
    free_port,
    namesrv_in_thread,
    thread_cpu_seconds,
    wait_listening,
)
from engine.client.admin.broker import BrokerAdmin
from engine.client.core.errors import TopicNotExistError
from engine.client.core.namesrv import NamesrvAdmin
from engine.protocol.body.topic import TopicConfig
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient
from engine.remoting.loop import run

BODY = b"x" * 1024
TOPIC = "BenchGrpc"
POP_TOPIC = "BenchGrpcPop"
GROUP = "BenchGrpcGroup"
RECEIVE_BATCH = 32  # what the 5.x SimpleConsumer asks for by default (maxMessageNum 32)
RECEIVE_IN_FLIGHT = 32
FILL = 400_000  # messages stored for the receive + ack runs (more than they take)
QUEUES = 8
RUNS = 3
SECONDS = 5.0
CHANNELS = 4
IN_FLIGHT = 256
HEADERS = (("x-mq-client-id", "bench-grpc-1"), ("x-mq-language", "PYTHON"),
           ("x-mq-client-version", "5.1.2"), ("x-mq-protocol", "GRPC_V2"))


def request_for(n: int, per_request: int = 1) -> spb.SendMessageRequest:
    messages = []
    for k in range(per_request):
        msg = pb.Message(topic=pb.Resource(name=TOPIC), body=BODY)
        msg.system_properties.message_id = f"01BENCH{n * per_request + k:026X}"
        msg.system_properties.tag = "TagA"
        messages.append(msg)
    return spb.SendMessageRequest(messages=messages)


async def timed(stubs: list[service_pb2_grpc.MessagingServiceStub], seconds: float,
                in_flight: int, per_request: int = 1) -> tuple[int, float, list[float]]:
    """Calls for `seconds` with `in_flight` at once; returns messages sent, time, latencies."""
    latencies: list[float] = []
    sent = 0
    deadline = time.perf_counter() + seconds
    requests = [request_for(i, per_request) for i in range(1024)]

    async def worker(k: int) -> None:
        nonlocal sent
        stub = stubs[k % len(stubs)]
        i = k
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            answer = await stub.SendMessage(requests[i % len(requests)], metadata=HEADERS,
                                            timeout=30)
            latencies.append(time.perf_counter() - t0)
            if answer.status.code != pb.OK:
                raise SystemExit(f"send failed: {answer.status}")
            sent += per_request
            i += in_flight

    start = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(in_flight)))
    return sent, time.perf_counter() - start, latencies


async def bench_stubs(endpoint: str, pid: int, label: str, *, in_flight: int = IN_FLIGHT,
                      per_request: int = 1, server: str = "broker+proxy") -> None:
    channels = [grpc.aio.insecure_channel(endpoint, options=[("grpc.use_local_subchannel_pool",
                                                              1)])
                for _ in range(CHANNELS)]
    stubs = [service_pb2_grpc.MessagingServiceStub(c) for c in channels]
    try:
        await timed(stubs, 2.0, in_flight, per_request)  # warm-up (routes, connections)
        rates, lat, server_cpu, client_cpu = [], [], [], []
        for _ in range(RUNS):
            b0, c0 = cpu_seconds(pid), time.process_time()
            sent, elapsed, latencies = await timed(stubs, SECONDS, in_flight, per_request)
            server_cpu.append((cpu_seconds(pid) - b0) / sent * 1e6)
            client_cpu.append((time.process_time() - c0) / sent * 1e6)
            rates.append(sent / elapsed)
            lat.extend(latencies)
        print(summary(label, rates, "msgs/s", 10_000))
        print(f"  latency per call p50 {percentile(lat, 50) * 1e3:.2f} ms, "
              f"p99 {percentile(lat, 99) * 1e3:.2f} ms")
        print(f"  {server} CPU {statistics.median(server_cpu):.1f} us/msg (min "
              f"{min(server_cpu):.1f}), client CPU {statistics.median(client_cpu):.1f} us/msg, "
              f"load average {os.getloadavg()[0]:.2f}")
    finally:
        for channel in channels:
            await channel.close()


H2LOAD_CALLS = 60_000
H2LOAD_CONNECTIONS = 4
H2LOAD_STREAMS = 64  # calls in flight per connection


def h2load_sends(endpoint: str, pid: int, label: str, *, server: str = "broker+proxy",
                 stored: Callable[[], int] | None = None) -> None:
    """One-message SendMessage calls driven by nghttp2's h2load, a load generator in C.

    h2load sends one fixed request (the gRPC frame of a SendMessageRequest of one 1 KiB
    message) on H2LOAD_CONNECTIONS connections with H2LOAD_STREAMS calls in flight on each, so
    the client costs a few microseconds per call instead of a Python client's hundred-odd on
    the same two cores.  It counts HTTP answers, not gRPC statuses: `stored` (the topic's
    message count) proves every call stored its message.  Besides the server process's CPU
    per message, the busiest thread's: the event loop's thread, which runs grpc.aio's Python
    layer, the proxy and the broker under one GIL and so bounds the rate.
    """
    tool = shutil.which("h2load")
    if tool is None:
        print(f"{label}: skipped (h2load, from nghttp2-client, is not installed)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        frame = request_for(0).SerializeToString()
        body = Path(tmp, "send.bin")
        body.write_bytes(b"\0" + struct.pack(">I", len(frame)) + frame)
        headers = [("content-type", "application/grpc"), ("te", "trailers"), *HEADERS]
        log_file = Path(tmp, "calls.tsv")
        command = [tool, "-n", str(H2LOAD_CALLS), "-c", str(H2LOAD_CONNECTIONS),
                   "-m", str(H2LOAD_STREAMS), "-d", str(body), "--log-file", str(log_file)]
        for key, value in headers:
            command += ["-H", f"{key}: {value}"]
        command.append(f"http://{endpoint}/apache.rocketmq.v2.MessagingService/SendMessage")

        def once() -> tuple[float, float, float, float, list[float]]:
            before = stored() if stored else 0
            t0, c0 = cpu_seconds(pid), thread_cpu_seconds(pid)
            start = time.perf_counter()
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            elapsed = time.perf_counter() - start
            busy = max((v - c0.get(tid, 0.0) for tid, v in thread_cpu_seconds(pid).items()),
                       default=float("nan"))
            server_cpu = cpu_seconds(pid) - t0
            done = next(line for line in out.splitlines() if line.startswith("requests:"))
            if f"{H2LOAD_CALLS} succeeded" not in done:
                raise SystemExit(f"h2load: {done}")
            if stored is not None and stored() - before != H2LOAD_CALLS:
                raise SystemExit(f"{stored() - before} messages stored of {H2LOAD_CALLS} sent")
            lat = [int(line.split("\t")[2]) / 1e6 for line in log_file.read_text().splitlines()]
            return (H2LOAD_CALLS / elapsed, server_cpu / H2LOAD_CALLS * 1e6,
                    busy / H2LOAD_CALLS * 1e6, elapsed, lat)

        once()  # warm-up
        runs = [once() for _ in range(RUNS)]
        print(summary(label, [r[0] for r in runs], "msgs/s", 10_000))
        lat = [x for r in runs for x in r[4]]
        print(f"  latency per call p50 {percentile(lat, 50) * 1e3:.2f} ms, "
              f"p99 {percentile(lat, 99) * 1e3:.2f} ms ({H2LOAD_CALLS:,} calls a run)")
        print(f"  {server} CPU {statistics.median(r[1] for r in runs):.1f} us/msg, of it the "
              f"busiest thread {statistics.median(r[2] for r in runs):.1f} us/msg; load "
              f"average {os.getloadavg()[0]:.2f}")


def receive_request(polling_ms: int = 1000) -> spb.ReceiveMessageRequest:
    """What the 5.x SimpleConsumer sends: a batch of 32, 60 s invisible, no auto-renew."""
    req = spb.ReceiveMessageRequest(
        group=pb.Resource(name=GROUP), batch_size=RECEIVE_BATCH, auto_renew=False,
        message_queue=pb.MessageQueue(topic=pb.Resource(name=POP_TOPIC), id=-1),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"))
    req.invisible_duration.FromSeconds(60)
    req.long_polling_timeout.FromMilliseconds(polling_ms)
    return req


async def receive_and_ack(stub: service_pb2_grpc.MessagingServiceStub,
                          req: spb.ReceiveMessageRequest) -> int:
    """One ReceiveMessage, then one AckMessage of all it brought; the messages acked."""
    entries = []
    async for resp in stub.ReceiveMessage(req, metadata=HEADERS, timeout=30):
        which = resp.WhichOneof("content")
        if which == "message":
            props = resp.message.system_properties
            entries.append(spb.AckMessageEntry(message_id=props.message_id,
                                               receipt_handle=props.receipt_handle))
        elif which == "status" and resp.status.code not in (pb.OK, pb.MESSAGE_NOT_FOUND):
            raise SystemExit(f"receive failed: {resp.status}")
    if not entries:
        return 0
    answer = await stub.AckMessage(spb.AckMessageRequest(
        group=pb.Resource(name=GROUP), topic=pb.Resource(name=POP_TOPIC), entries=entries),
        metadata=HEADERS, timeout=30)
    if answer.status.code != pb.OK:
        raise SystemExit(f"ack failed: {answer.status}")
    return len(entries)


async def timed_receive(stubs: list[service_pb2_grpc.MessagingServiceStub], seconds: float,
                        in_flight: int) -> tuple[int, float, list[float]]:
    """Receive + ack rounds for `seconds` with `in_flight` at once: messages acked, time,
    latencies of the rounds."""
    latencies: list[float] = []
    acked = 0
    deadline = time.perf_counter() + seconds
    req = receive_request()

    async def worker(k: int) -> None:
        nonlocal acked
        stub = stubs[k % len(stubs)]
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            got = await receive_and_ack(stub, req)
            latencies.append(time.perf_counter() - t0)
            acked += got  # 0 now and then: the queues were held by the other rounds' POPs

    start = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(in_flight)))
    return acked, time.perf_counter() - start, latencies


async def bench_receive(endpoint: str, pid: int, acks: str) -> None:
    channels = [grpc.aio.insecure_channel(endpoint, options=[("grpc.use_local_subchannel_pool",
                                                              1)])
                for _ in range(CHANNELS)]
    stubs = [service_pb2_grpc.MessagingServiceStub(c) for c in channels]
    try:
        await timed_receive(stubs, 2.0, RECEIVE_IN_FLIGHT)  # warm-up
        rates, lat, server_cpu, client_cpu = [], [], [], []
        for _ in range(RUNS):
            b0, c0 = cpu_seconds(pid), time.process_time()
            acked, elapsed, latencies = await timed_receive(stubs, SECONDS, RECEIVE_IN_FLIGHT)
            if acked < 1000:
                raise SystemExit("the topic ran out of messages: raise FILL")
            server_cpu.append((cpu_seconds(pid) - b0) / acked * 1e6)
            client_cpu.append((time.process_time() - c0) / acked * 1e6)
            rates.append(acked / elapsed)
            lat.extend(latencies)
        print(summary(f"ReceiveMessage (batches of {RECEIVE_BATCH}) + AckMessage (all of a "
                      f"batch in one call) over gRPC, 1 KiB, {RECEIVE_IN_FLIGHT} rounds in "
                      f"flight on {CHANNELS} channels (raw stubs), {acks}", rates, "msgs/s",
                      10_000))
        print(f"  latency per receive + ack p50 {percentile(lat, 50) * 1e3:.2f} ms, "
              f"p99 {percentile(lat, 99) * 1e3:.2f} ms")
        print(f"  broker+proxy CPU {statistics.median(server_cpu):.1f} us/msg (min "
              f"{min(server_cpu):.1f}), client CPU {statistics.median(client_cpu):.1f} us/msg, "
              f"load average {os.getloadavg()[0]:.2f}")
    finally:
        for channel in channels:
            await channel.close()


async def fill_for_receive(endpoint: str) -> None:
    """Start the group at the topic's (empty) end, then store FILL messages for it."""
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        async for _ in stub.ReceiveMessage(receive_request(0), metadata=HEADERS, timeout=30):
            pass  # POP's init mode MAX: the group's queues start at their current end
        per_request, requests = 32, []
        for n in range(64):
            req = request_for(n, per_request)
            for msg in req.messages:
                msg.topic.name = POP_TOPIC
            requests.append(req)
        sent = 0

        async def worker(k: int) -> None:
            nonlocal sent
            while sent < FILL:
                sent += per_request
                answer = await stub.SendMessage(requests[k], metadata=HEADERS, timeout=30)
                if answer.status.code != pb.OK:
                    raise SystemExit(f"send failed: {answer.status}")

        await asyncio.gather(*(worker(k) for k in range(len(requests))))


class _NoopService:
    """A MessagingService whose SendMessage answers OK and does nothing else."""

    async def SendMessage(self, request: object, context: object) -> spb.SendMessageResponse:
        return spb.SendMessageResponse(status=pb.Status(code=pb.OK))

    def __getattr__(self, name: str) -> object:
        async def unused(request: object, context: object) -> None:
            return None
        return unused


async def serve_noop() -> None:
    server = grpc.aio.server(options=[("grpc.optimization_target", "throughput")])  # as the proxy
    service_pb2_grpc.add_MessagingServiceServicer_to_server(_NoopService(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await server.wait_for_termination()


async def serve_proxy_without_broker() -> None:
    """The proxy with a gateway whose sends answer at once (no broker behind it)."""
    from engine.proxy.brokers import Sent
    from engine.proxy.config import ProxyConfig
    from engine.proxy.messages import OutMessage
    from engine.proxy.route import WriteQueue
    from engine.proxy.server import ProxyServer

    proxy = ProxyServer(ProxyConfig(grpc_server_port=0, enable_topic_message_type_check=False),
                        "127.0.0.1:9", host="127.0.0.1")
    queues = [WriteQueue("bench-broker", "127.0.0.1:9", i, QUEUES) for i in range(QUEUES)]

    async def write_queues(topic: str) -> list[WriteQueue]:
        return queues

    async def send(queue: WriteQueue, msgs: list[OutMessage]) -> list[Sent]:
        return [Sent(queue.broker_name, queue.broker_addr, queue.queue_id, 0, "0" * 32, None, 0)
                for _ in msgs]

    proxy.gateway.write_queues = write_queues  # type: ignore[method-assign]
    proxy.gateway.send = send  # type: ignore[method-assign]
    await proxy.start()
    print(proxy.port, flush=True)
    await asyncio.Event().wait()


def bench_for_scale() -> None:
    for mode, label, server in (
            ("--noop-server", "for scale: the same calls to a no-op grpc.aio servicer "
                              "(gRPC's own cost)", "no-op server"),
            ("--proxy-without-broker", "for scale: the same calls to the proxy whose broker "
                                       "answers at once (the proxy's own cost)", "proxy")):
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_grpc", mode],
                                stdout=subprocess.PIPE, env=os.environ.copy())
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline())
            h2load_sends(f"127.0.0.1:{port}", proc.pid, f"{label}, h2load", server=server)
            run(bench_stubs(f"127.0.0.1:{port}", proc.pid, f"{label}, raw stubs",
                            server=server))
        finally:
            proc.kill()
            proc.wait(60)


def bench_official_client(endpoint: str, pid: int, threads: int = 16,
                          seconds: float = SECONDS) -> None:
    from rocketmq.v5.client import ClientConfiguration, Credentials
    from rocketmq.v5.model import Message
    from rocketmq.v5.producer import Producer

    producer = Producer(ClientConfiguration(endpoint, Credentials()), (TOPIC,))
    producer.startup()
    sent = [0] * threads
    try:
        deadline = time.monotonic() + seconds
        b0 = cpu_seconds(pid)

        def loop(k: int) -> None:
            while time.monotonic() < deadline:
                msg = Message()
                msg.topic, msg.body, msg.tag = TOPIC, BODY, "TagA"
                producer.send(msg)
                sent[k] += 1

        start = time.monotonic()
        workers = [threading.Thread(target=loop, args=(k,)) for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        elapsed = time.monotonic() - start
        total = sum(sent)
        print(f"official Python client, {threads} threads calling send: "
              f"{total / elapsed:,.0f} msgs/s ({total} in {elapsed:.1f} s), broker+proxy CPU "
              f"{(cpu_seconds(pid) - b0) / max(total, 1) * 1e6:.1f} us/msg")
    finally:
        producer.shutdown()


async def create_topic(broker_addr: str, namesrv_addr: str, topic: str = TOPIC) -> None:
    """Create the topic and wait until the name server routes it (the proxy reads routes)."""
    client = RemotingClient()
    try:
        await BrokerAdmin(client).create_topic(broker_addr, TopicConfig(topic, QUEUES, QUEUES))
        async with NamesrvAdmin(namesrv_addr) as ns:
            for _ in range(200):
                try:
                    await ns.topic_route(topic)
                    return
                except TopicNotExistError:
                    await asyncio.sleep(0.05)
        raise SystemExit("the topic never reached the name server")
    finally:
        await client.close()


async def stored_count(broker_addr: str, topic: str = TOPIC) -> int:
    """Messages the broker holds in `topic` (the sum of its queues' max offsets)."""
    client = RemotingClient()
    try:
        admin = BrokerAdmin(client)
        return sum([await admin.max_offset(broker_addr, topic, q) for q in range(QUEUES)])
    finally:
        await client.close()


@contextlib.contextmanager
def broker_with_proxy(tmp: str, namesrv_addr: str,
                      proxy: dict[str, object]) -> Iterator[tuple[str, int, str]]:
    """`mqbroker --enable-proxy` in its own process: yields (gRPC endpoint, pid, broker
    address) with the benchmark's topics created."""
    port, grpc_port = free_port(), free_port()
    root = Path(tmp, f"broker-{port}")
    root.mkdir()
    conf = root / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in {
        "brokerName": "bench-broker", "brokerIP1": "127.0.0.1", "bindAddress": "127.0.0.1",
        "listenPort": port, "storePathRootDir": f"{root}/store", "logsDir": f"{root}/logs",
        "flushDiskType": "ASYNC_FLUSH", "namesrvAddr": namesrv_addr}.items()))
    pc = root / "rmq-proxy.json"
    pc.write_text(json.dumps({"grpcServerPort": grpc_port, **proxy}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.broker.main", "-c", str(conf), "--enable-proxy",
         "-pc", str(pc)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "HOME": str(root)})
    try:
        asyncio.run(wait_listening(grpc_port, proc))
        broker_addr = f"127.0.0.1:{port}"
        run(create_topic(broker_addr, namesrv_addr))
        run(create_topic(broker_addr, namesrv_addr, POP_TOPIC))
        yield f"127.0.0.1:{grpc_port}", proc.pid, broker_addr
    finally:
        proc.terminate()
        proc.wait(60)


def main() -> None:
    print(machine())
    with tempfile.TemporaryDirectory() as tmp, namesrv_in_thread(tmp) as ns_addr:
        with broker_with_proxy(tmp, ns_addr, {"enableBatchAck": True}) as (endpoint, pid,
                                                                            broker):
            h2load_sends(endpoint, pid, "SendMessage over gRPC, 1 KiB, one message per "
                         f"call, {H2LOAD_STREAMS * H2LOAD_CONNECTIONS} in flight on "
                         f"{H2LOAD_CONNECTIONS} connections (h2load)",
                         stored=lambda: run(stored_count(broker)))
            run(bench_stubs(endpoint, pid, "SendMessage over gRPC, 1 KiB, one message per "
                            f"call, {IN_FLIGHT} in flight on {CHANNELS} channels (raw "
                            "grpc.aio stubs in this process)"))
            run(bench_stubs(endpoint, pid, "SendMessage over gRPC, 16 x 1 KiB per call, "
                            "32 in flight (raw stubs)", in_flight=32, per_request=16))
            bench_official_client(endpoint, pid)
            run(fill_for_receive(endpoint))
            run(bench_receive(endpoint, pid, "enableBatchAck=true"))
        with broker_with_proxy(tmp, ns_addr, {}) as (endpoint, pid, _):
            run(fill_for_receive(endpoint))
            run(bench_receive(endpoint, pid, "the default, one ACK_MESSAGE per entry"))


def bench_apache5(home: str) -> None:
    """The one-message calls against Apache 5.3.3's broker with its proxy (local mode)."""
    with tempfile.TemporaryDirectory() as tmp:
        ns_port, broker_port, grpc_port, remoting_port = (free_port(), free_port(),
                                                          free_port(), free_port())
        ns = f"127.0.0.1:{ns_port}"
        Path(tmp, "ns.conf").write_text(f"listenPort={ns_port}\n")
        Path(tmp, "broker.conf").write_text("\n".join([
            "brokerClusterName=BenchCluster", "brokerName=bench-apache", "brokerId=0",
            f"listenPort={broker_port}", "brokerIP1=127.0.0.1", f"namesrvAddr={ns}",
            f"storePathRootDir={tmp}/store", "flushDiskType=ASYNC_FLUSH", ""]))
        Path(tmp, "proxy.json").write_text(json.dumps({
            "rocketMQClusterName": "BenchCluster", "namesrvAddr": ns,
            "grpcServerPort": grpc_port, "remotingListenPort": remoting_port}))
        env = {**os.environ, "JAVA_OPT_EXT": f"-Duser.home={tmp}",
               "RMQ_HEAP": "-Xms512m -Xmx512m"}
        procs = [subprocess.Popen([f"{home}/mqnamesrv.sh", "-c", f"{tmp}/ns.conf"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)]
        try:
            asyncio.run(wait_listening(ns_port, procs[0]))
            procs.append(subprocess.Popen(
                [f"{home}/mqbroker.sh", "-n", ns, "-c", f"{tmp}/broker.conf", "--enable-proxy",
                 "-pc", f"{tmp}/proxy.json"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env=env))
            asyncio.run(wait_listening(grpc_port, procs[1]))
            run(create_topic(f"127.0.0.1:{broker_port}", ns))
            h2load_sends(f"127.0.0.1:{grpc_port}", _java_pid(procs[1].pid),
                         "Apache 5.3.3's broker with its proxy: one message per call (h2load)",
                         server="Apache broker+proxy (JVM)",
                         stored=lambda: run(stored_count(f"127.0.0.1:{broker_port}")))
            run(bench_stubs(f"127.0.0.1:{grpc_port}", _java_pid(procs[1].pid),
                            "Apache 5.3.3's broker with its proxy: one message per call, "
                            f"{IN_FLIGHT} in flight", server="Apache broker+proxy (JVM)"))
        finally:
            for proc in reversed(procs):
                proc.terminate()
            for proc in procs:
                proc.wait(60)


def _java_pid(script_pid: int) -> int:
    """The JVM the start script runs (its child, or the script itself after `exec`)."""
    try:
        children = Path(f"/proc/{script_pid}/task/{script_pid}/children").read_text().split()
    except OSError:
        return script_pid
    return int(children[-1]) if children else script_pid


if __name__ == "__main__":
    if sys.argv[1:] == ["--noop-server"]:
        run(serve_noop())
    elif sys.argv[1:] == ["--proxy-without-broker"]:
        run(serve_proxy_without_broker())
    else:
        main()
        bench_for_scale()
        if os.environ.get("APACHE_RMQ5_HOME"):
            bench_apache5(os.environ["APACHE_RMQ5_HOME"])

"""PushConsumer retries and dead letters as the official clients see them: one scenario, three
clients (Python, Node.js, Java 5.x), any proxy.

How this works: a case creates a fresh topic (NORMAL or FIFO) and a group with its retry policy
(retryMaxTimes, orderly for FIFO) through the broker's remoting port, starts one official
PushConsumer whose listener fails (answers FAILURE, or throws) the first K deliveries of each
message (every delivery with K = -1), sends its messages with raw gRPC stubs (fixed ids, tag,
keys, properties, so two proxies' dead letters can be compared), and reads each delivery as the
client reports it (message, delivery attempt, result, when) until each message has succeeded
or is in the group's %DLQ% (read with a 4.x remoting pull, polled).  What it
returns is what tests/proxy/test_apache5_push.py compares between Apache 5.3.3 and ours, and
what tests/proxy/test_push_retry.py asserts of ours alone.

The Java client is the Peer5 command-line peer (RMQ_JAVA5_PEER, see docs/proxy.md): its
`push` command fails the first K deliveries with FAILURE and cannot throw.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import grpc

from engine.protocol.codes import RequestCode, ResponseCode
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient
from tests.broker.conftest import call
from tests.proxy.conftest import in_thread
from tests.proxy.differential import CreateTopic, dead_letters, described, routed
from tests.proxy.nodejs import NodeClient
from tests.proxy.official import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    MessageListener,
    PushConsumer,
)
from tests.proxy.official import Message as OfficialMessage
from tests.proxy.test_receive_rules import headers

JAVA5_PEER = os.environ.get("RMQ_JAVA5_PEER", "")
#: How long a case may take to settle (each message succeeded or dead): three deliveries, each
#: after a backoff and the end of the client's pending 20 s long poll, and a NORMAL dead letter
#: moved at the pop after that (5.3.3).
SETTLE_TIMEOUT_S = 240.0


@dataclasses.dataclass(frozen=True, slots=True)
class Delivery:
    """One call of the listener, as the client reports it."""

    message_id: str
    body: str
    attempt: int
    result: str  # SUCCESS, FAILURE, THROWN
    at: float  # seconds, on the client's own clock
    message_group: str | None = None


class Consumer(Protocol):
    async def next(self) -> Delivery: ...


#: Starts a PushConsumer: (endpoint, topic, group, fail_first, throws) -> a running consumer.
Driver = Callable[[str, str, str, int, bool], contextlib.AbstractAsyncContextManager[Consumer]]


def _fails(delivery: int, fail_first: int) -> bool:
    return fail_first < 0 or delivery <= fail_first


# --- the Python client -----------------------------------------------------------------------

class _Listener(MessageListener):
    """Fails the first `fail_first` deliveries of each message; hands each to the test's loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Delivery],
                 fail_first: int, throws: bool) -> None:
        self.loop, self.queue, self.fail_first, self.throws = loop, queue, fail_first, throws
        self.deliveries: dict[str, int] = {}
        self.lock = threading.Lock()

    def consume(self, message: OfficialMessage) -> ConsumeResult:
        with self.lock:
            count = self.deliveries[message.message_id] = \
                self.deliveries.get(message.message_id, 0) + 1
        fails = _fails(count, self.fail_first)
        result = ("THROWN" if self.throws else "FAILURE") if fails else "SUCCESS"
        delivery = Delivery(message.message_id, message.body.decode(), message.delivery_attempt,
                            result, time.monotonic(), message.message_group or None)
        self.loop.call_soon_threadsafe(self.queue.put_nowait, delivery)
        if fails and self.throws:
            raise RuntimeError(f"listener fails delivery {count}")
        return ConsumeResult.FAILURE if fails else ConsumeResult.SUCCESS


@dataclasses.dataclass
class _Queued:
    queue: asyncio.Queue[Delivery]

    async def next(self) -> Delivery:
        return await asyncio.wait_for(self.queue.get(), SETTLE_TIMEOUT_S)


@contextlib.asynccontextmanager
async def python_client(endpoint: str, topic: str, group: str, fail_first: int,
                        throws: bool) -> AsyncIterator[Consumer]:
    queue: asyncio.Queue[Delivery] = asyncio.Queue()
    listener = _Listener(asyncio.get_running_loop(), queue, fail_first, throws)
    consumer = PushConsumer(ClientConfiguration(endpoint, Credentials()), group, listener,
                            {topic: FilterExpression("*")})
    await in_thread(consumer.startup)
    try:
        yield _Queued(queue)
    finally:
        await in_thread(consumer.shutdown)


# --- the Node.js client ----------------------------------------------------------------------

def node_client_driver(node: NodeClient) -> Driver:
    @contextlib.asynccontextmanager
    async def start(endpoint: str, topic: str, group: str, fail_first: int,
                    throws: bool) -> AsyncIterator[Consumer]:
        async with node.start("push_retry.js", endpoint=endpoint, topic=topic, group=group,
                              failFirst=fail_first, throws=throws) as scenario:
            await scenario.next("started")

            class Lines:
                async def next(self) -> Delivery:
                    line = await scenario.next("consumed", SETTLE_TIMEOUT_S)
                    return Delivery(str(line["messageId"]), str(line["body"]),
                                    int(line["deliveryAttempt"]), str(line["result"]),
                                    float(line["atMs"]) / 1000, line["messageGroup"] or None)

            yield Lines()
    return start


# --- the Java client (Peer5) -----------------------------------------------------------------

#: BODY attempt=A id=ID [group=G] age_ms=N -> RESULT
PEER_LINE = re.compile(r"^(?P<body>\S*) attempt=(?P<attempt>\d+) id=(?P<id>\S+)"
                       r"(?: group=(?P<group>\S+))? age_ms=-?\d+.* -> (?P<result>\w+)$")


@contextlib.asynccontextmanager
async def java_client(endpoint: str, topic: str, group: str, fail_first: int,
                      throws: bool) -> AsyncIterator[Consumer]:
    if throws:
        raise ValueError("the Java peer's listener answers FAILURE; it cannot throw")
    # the peer fails the first K deliveries of each message ("always": more failures than any
    # retry policy here allows) and would end once N messages succeeded: N is more than sent,
    # and the case ends it
    logs = tempfile.TemporaryDirectory(prefix="peer5-")  # the client's log file
    process = await asyncio.create_subprocess_exec(
        JAVA5_PEER, endpoint, "push", topic, group, "1000",
        "--fail-first", str(fail_first if fail_first >= 0 else 1000), "--timeout-s", "600",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PEER5_LOG_DIR": logs.name})

    class Lines:
        async def next(self) -> Delivery:
            assert process.stdout is not None and process.stderr is not None
            while True:
                raw = await asyncio.wait_for(process.stdout.readline(), SETTLE_TIMEOUT_S)
                if not raw:
                    err = await process.stderr.read()
                    raise AssertionError(f"the Java peer ended: {err.decode()[-2000:]}")
                match = PEER_LINE.match(raw.decode().strip())
                if match:
                    return Delivery(match["id"], match["body"], int(match["attempt"]),
                                    match["result"], time.monotonic(), match["group"])

    try:
        yield Lines()
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        logs.cleanup()


# --- the scenario ----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, slots=True)
class Case:
    """One run of a PushConsumer: the topic's type, the group's retries, the listener's rule,
    the messages sent (bodies, all in one message group for FIFO)."""

    name: str
    message_type: str | None  # None: NORMAL
    retry_max_times: int
    fail_first: int  # -1: every delivery fails
    throws: bool = False
    bodies: tuple[str, ...] = ("poison",)


RETRY = Case("retry", None, 3, 2)
DEAD = Case("dead", None, 1, -1)
FIFO = Case("fifo", "FIFO", 1, -1, bodies=("first", "second"))
THROWN = Case("thrown", None, 1, -1, throws=True)
FIFO_RETRY = Case("fiforetry", "FIFO", 3, 2, bodies=("first", "second"))


async def make_group(broker: str, group: str, retry_max_times: int, *, orderly: bool) -> None:
    """A group with `retry_max_times` (its 5.x clients' max attempts, less one)."""
    body = json.dumps({"groupName": group, "consumeEnable": True,
                       "retryMaxTimes": retry_max_times, "consumeMessageOrderly": orderly})
    remoting = RemotingClient()
    try:
        made = await call(remoting, broker, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                          body=body.encode())
    finally:
        await remoting.close()
    assert made.code == ResponseCode.SUCCESS, made.remark


async def _send(stub: service_pb2_grpc.MessagingServiceStub, case: Case, topic: str,
                tag: str) -> list[str]:
    ids = []
    for n, body in enumerate(case.bodies):
        msg = pb.Message(topic=pb.Resource(name=topic), body=body.encode(),
                         user_properties={"k": "v"})
        msg.system_properties.message_id = f"01PUSH{time.time_ns():018X}{n:02X}"
        msg.system_properties.tag = "TagA"
        msg.system_properties.keys.append(f"Key{n}")
        if case.message_type == "FIFO":
            msg.system_properties.message_group = f"g{tag}"
        sent = await stub.SendMessage(spb.SendMessageRequest(messages=[msg]),
                                      metadata=headers(f"push-sender-{tag}"), timeout=10)
        assert sent.status.code == pb.OK, sent.status
        ids.append(msg.system_properties.message_id)
    return ids


async def _settled(broker: str, group: str, bodies: tuple[str, ...],
                   deliveries: list[Delivery]) -> list[Any]:
    """The group's dead letters once each message has succeeded or is among them (the
    broker's state, polled)."""
    remoting = RemotingClient()
    try:
        while True:
            dead = await dead_letters(remoting, broker, group)
            gone = {record.body.decode() for record in dead} | {
                d.body for d in deliveries if d.result == "SUCCESS"}
            if gone >= set(bodies):
                return dead
            await asyncio.sleep(0.2)
    finally:
        await remoting.close()


async def run_case(endpoint: str, broker: str, create: CreateTopic, driver: Driver,
                   case: Case) -> tuple[dict[str, Any], list[float]]:
    """What a PushConsumer saw in `case`: the deliveries (body, attempt, result, in order),
    the dead letters (described as tests/proxy/test_apache5_dlq.py does), and the seconds
    between one message's deliveries."""
    tag = f"{time.time_ns() % 10**9:09d}"
    topic, group = f"Push{case.name}{tag}", f"PushGroup{case.name}{tag}"
    await create(topic, 1, case.message_type)
    await make_group(broker, group, case.retry_max_times, orderly=case.message_type == "FIFO")
    deliveries: list[Delivery] = []
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        await routed(stub, topic)
        async with driver(endpoint, topic, group, case.fail_first, case.throws) as consumer:

            async def collect() -> None:
                while True:
                    deliveries.append(await consumer.next())

            collecting = asyncio.ensure_future(collect())
            settled: asyncio.Future[list[Any]] | None = None
            try:
                ids = await _send(stub, case, topic, tag)
                settled = asyncio.ensure_future(_settled(broker, group, case.bodies, deliveries))
                await asyncio.wait([settled, collecting], timeout=SETTLE_TIMEOUT_S,
                                   return_when=asyncio.FIRST_COMPLETED)
                if collecting.done():  # the client failed, or no delivery came in time
                    settled.cancel()
                    collecting.result()
                assert settled.done(), f"{case} not settled: {deliveries}"
                dead = settled.result()
            finally:
                for task in (collecting, settled):
                    if task is not None:
                        task.cancel()
                        await asyncio.gather(task, return_exceptions=True)
    order = {message_id: n for n, message_id in enumerate(ids)}
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(deliveries)
            if earlier.message_id == later.message_id]
    seen = {
        "deliveries": [(order.get(d.message_id), d.body, d.attempt, d.result,
                        d.message_group is not None) for d in deliveries],
        "dead": [described(record, tag) for record in dead],
    }
    return seen, gaps

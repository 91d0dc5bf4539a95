"""Message trace of a gRPC client's message on Apache 5.3.3 (opt-in, APACHE_RMQ5_HOME): with
the broker's trace topic enabled, a 5.x client's send, receive (POP) and ack through 5.3.3's
proxy write no trace record (neither the proxy nor the 5.x clients trace), and the console
says so for both of its ids, on the command line and on the message screen's timeline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from engine.client.admin.cluster import MQAdmin
from engine.protocol.message import MessageRecord
from engine.protocol.trace import TRACE_TOPIC
from mqadmin.exit_codes import ExitCode
from mqadmin.operations.messages.ids import find_by_id
from mqadmin.tui.data.timeline import Timeline, read_timeline
from tests.apache5 import CLUSTER, Apache5, needs_apache5, running_apache5
from tests.mqadmin.cli import invoke, json_rows
from tests.proxy.official import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)

pytestmark = [needs_apache5, pytest.mark.timeout(300)]

TOPIC = "TraceT5"
GROUP = "TraceGrpc5"
NEVER_TRACED = "a 5.x client sent it through a gRPC proxy"


@pytest.fixture(scope="module")
def traced5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Apache5]:
    with running_apache5(tmp_path_factory.mktemp("apache5-trace"),
                         ["traceTopicEnable=true", "traceOn=true"]) as cluster:
        yield cluster


def _trace_records(ns: str) -> int:
    rows = json_rows("topicStatus", "-n", ns, "-t", TRACE_TOPIC)
    return sum(int(r["maxOffset"]) - int(r["minOffset"]) for r in rows)


def _send_pop_ack(endpoint: str) -> str:
    producer = Producer(ClientConfiguration(endpoint, Credentials()), (TOPIC,))
    producer.startup()
    try:
        msg = Message()
        msg.topic, msg.body, msg.keys, msg.tag = TOPIC, b"traced?", "trace-key", "TagA"
        msg_id: str = producer.send(msg).message_id
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(ClientConfiguration(endpoint, Credentials()), GROUP,
                              {TOPIC: FilterExpression("*")}, await_duration=2)
    consumer.startup()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                got = consumer.receive(16, 15) or []
            except Exception:  # "settings is null" until the proxy has the client's settings
                time.sleep(0.5)
                continue
            for m in got:
                consumer.ack(m)
            if any(m.message_id == msg_id for m in got):
                return msg_id
        raise AssertionError(f"{msg_id} never received")
    finally:
        consumer.shutdown()


async def _timeline(ns: str, msg_id: str) -> tuple[MessageRecord, Timeline]:
    async with MQAdmin(ns) as admin:
        record = (await find_by_id(admin, msg_id, TOPIC))[0].record
        return record, await read_timeline(admin, record)


def test_a_grpc_message_has_no_trace_and_the_console_says_why(traced5: Apache5) -> None:
    made = invoke("updateTopic", "-n", traced5.ns, "-c", CLUSTER, "-t", TOPIC, "-r", "1",
                  "-w", "1", "-a", "+message.type=NORMAL", "--yes")
    assert made.exit_code == 0, made.stderr
    before = _trace_records(traced5.ns)  # the trace topic exists: traceTopicEnable=true
    msg_id = _send_pop_ack(traced5.grpc)
    assert _trace_records(traced5.ns) == before

    by_id = invoke("queryMsgTraceById", "-n", traced5.ns, "-i", msg_id)
    assert by_id.exit_code == ExitCode.NOT_FOUND
    assert NEVER_TRACED in by_id.stderr

    record, line = asyncio.run(_timeline(traced5.ns, msg_id))
    assert record.properties()["__BORNHOST"]  # stamped by 5.3.3's proxy
    assert NEVER_TRACED in line.note
    assert [s.step for s in line.steps] == ["sent", "stored"]

    by_offset = invoke("queryMsgTraceById", "-n", traced5.ns, "-i", record.offset_msg_id)
    assert by_offset.exit_code == ExitCode.NOT_FOUND
    assert "the message exists (topic TraceT5" in by_offset.stderr
    assert NEVER_TRACED in by_offset.stderr


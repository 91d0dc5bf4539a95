"""Traces and printMsg on an Apache 4.9.8 cluster (opt-in: needs the Apache build named by
APACHE_RMQ_HOME, see docs, and a JDK): what Apache's Java producer and consumer trace
(enableMsgTrace) is read by our queryMsgTraceById, under either id; what ours trace is read by
Apache's `mqadmin queryMsgTraceById`; printMsg keeps to its time range.  Apache's name server
and broker (traceTopicEnable) run as processes for the module."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.client.admin import MQAdmin
from engine.client.client_config import ClientConfig
from engine.client.consumer_options import ConsumerOptions
from engine.client.errors import ClientError
from engine.client.message import Message, MessageExt
from engine.client.namesrv import NamesrvAdmin
from engine.client.producer import Producer
from engine.client.producer_options import ProducerOptions
from engine.client.push_consumer import PushConsumer
from engine.client.results import ConsumeConcurrentlyStatus
from engine.protocol.body.heartbeat import ConsumeFromWhere
from engine.protocol.trace import TRACE_TOPIC
from mqadmin.operations.messages.ids import find_by_id
from mqadmin.operations.messages.scan import print_msg
from mqadmin.operations.messages.trace import query_trace
from tests.ports import free_port

HOME = os.environ.get("APACHE_RMQ_HOME", "")
JAVAC = shutil.which("javac")
pytestmark = pytest.mark.skipif(not (HOME and Path(HOME, "classpath").is_file() and JAVAC),
                                reason="needs APACHE_RMQ_HOME (the Apache build) and javac")

#: A producer and a push consumer with enableMsgTrace=true: sends args[1] messages to topic
#: args[2] with keys "javakey-N", prints "SENT msgId offsetMsgId" for each, waits until they
#: are consumed, then shuts both down (which sends the traces still queued).
TRACED_CLIENTS = r"""
import java.util.concurrent.*;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.*;
import org.apache.rocketmq.client.producer.*;
import org.apache.rocketmq.common.message.Message;

public class TracedClients {
    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[1]);
        DefaultMQProducer producer = new DefaultMQProducer("JavaTracePG", true);
        producer.setNamesrvAddr(args[0]);
        producer.start();
        CountDownLatch done = new CountDownLatch(n);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("JavaTraceCG", true, null);
        consumer.setNamesrvAddr(args[0]);
        consumer.subscribe(args[2], "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (int i = 0; i < msgs.size(); i++) done.countDown();
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        for (int i = 0; i < n; i++) {
            SendResult r = producer.send(new Message(args[2], "TagJ", "javakey-" + i,
                                                     ("hello " + i).getBytes("UTF-8")));
            System.out.println("SENT " + r.getMsgId() + " " + r.getOffsetMsgId());
        }
        if (!done.await(60, TimeUnit.SECONDS)) throw new IllegalStateException("not consumed");
        Thread.sleep(1000);
        consumer.shutdown();
        producer.shutdown();
    }
}
"""


def _java() -> str:
    return str(Path(str(JAVAC)).with_name("java"))


def _jvm_options() -> list[str]:
    """The options of the build's env.sh (G1 and the --add-opens Java 17 needs)."""
    out = subprocess.run(["bash", "-c", f'. "{HOME}/env.sh" && echo "$RMQ_COMMON_OPTS"'],
                         check=True, capture_output=True, text=True)
    return out.stdout.split()


async def _wait_registered(namesrv: str, deadline: float) -> None:
    """Until the broker has registered the trace topic it creates."""
    async with NamesrvAdmin(namesrv) as ns:
        while time.monotonic() < deadline:
            with contextlib.suppress(ClientError, OSError):
                if (await ns.topic_route(TRACE_TOPIC)).queue_datas:
                    return
            await asyncio.sleep(0.5)
    raise TimeoutError("Apache's broker did not register RMQ_SYS_TRACE_TOPIC")


@pytest.fixture(scope="module")
def apache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The name server address of an Apache name server and broker (traceTopicEnable)."""
    root = tmp_path_factory.mktemp("apache")
    ns_port, broker_port = free_port(), free_port()
    (root / "ns.conf").write_text(f"listenPort={ns_port}\n")
    (root / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in {
        "brokerClusterName": "ApacheCluster", "brokerName": "apache-a", "brokerId": 0,
        "namesrvAddr": f"127.0.0.1:{ns_port}", "brokerIP1": "127.0.0.1",
        "listenPort": broker_port, "storePathRootDir": root / "store",
        "storePathCommitLog": root / "store" / "commitlog", "autoCreateTopicEnable": "true",
        "traceTopicEnable": "true", "flushDiskType": "ASYNC_FLUSH"}.items()))
    classpath = Path(HOME, "classpath").read_text().strip()
    env = {**os.environ, "ROCKETMQ_HOME": HOME}
    common = [_java(), *_jvm_options(), f"-Duser.home={root}", f"-Drmq.logdir={root}/logs",
              "-cp", classpath]
    procs = [subprocess.Popen([*common[:1], "-Xmx256m", *common[1:],
                               "org.apache.rocketmq.namesrv.NamesrvStartup",
                               "-c", str(root / "ns.conf")],
                              stdout=(root / "ns.out").open("w"), stderr=subprocess.STDOUT,
                              env=env)]
    procs.append(subprocess.Popen([*common[:1], "-Xms256m", "-Xmx512m",
                                   "-XX:MaxDirectMemorySize=512m", *common[1:],
                                   "org.apache.rocketmq.broker.BrokerStartup",
                                   "-c", str(root / "broker.conf")],
                                  stdout=(root / "broker.out").open("w"),
                                  stderr=subprocess.STDOUT, env=env))
    namesrv = f"127.0.0.1:{ns_port}"
    try:
        asyncio.run(_wait_registered(namesrv, time.monotonic() + 90))
        yield namesrv
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def test_our_query_reads_the_traces_of_apache_s_java_clients(
        apache: str, tmp_path: Path) -> None:
    classpath = Path(HOME, "classpath").read_text().strip()
    (tmp_path / "TracedClients.java").write_text(TRACED_CLIENTS)
    subprocess.run([str(JAVAC), "-nowarn", "-cp", classpath, "-d", str(tmp_path),
                    str(tmp_path / "TracedClients.java")], check=True, capture_output=True)
    run = await asyncio.create_subprocess_exec(
        _java(), *_jvm_options(), f"-Duser.home={tmp_path}", "-cp", f"{tmp_path}:{classpath}",
        "TracedClients", apache, "2", "JavaTraced", stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL)
    out, _ = await asyncio.wait_for(run.communicate(), 120)
    assert run.returncode == 0
    sent = [line.split()[1:] for line in out.decode().splitlines() if line.startswith("SENT")]
    assert len(sent) == 2
    async with MQAdmin(apache) as admin:
        for msg_id, offset_msg_id in sent:
            for asked in (msg_id, offset_msg_id):
                lookup = await query_trace(admin, asked)
                assert lookup.msg_id == msg_id
                kinds = {(row["type"], row["group"]) for row in lookup.rows}
                assert kinds == {("Pub", "JavaTracePG"), ("SubBefore", "JavaTraceCG"),
                                 ("SubAfter", "JavaTraceCG")}, lookup.rows
                pub = next(row for row in lookup.rows if row["type"] == "Pub")
                assert (pub["topic"], pub["tags"], pub["status"]) == ("JavaTraced", "TagJ",
                                                                      "success")
                assert pub["offsetMsgId"] == offset_msg_id


async def test_apache_s_query_reads_the_traces_of_our_clients(apache: str) -> None:
    config = ClientConfig(namesrv_addr=apache)
    producer = Producer("PyTracePG", config, options=ProducerOptions(enable_trace=True))
    consumer = PushConsumer("PyTraceCG", config, options=ConsumerOptions(
        enable_trace=True, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET))
    consumed = asyncio.Event()

    def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        consumed.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    await producer.start()
    try:
        consumer.subscribe("PyTraced", "*")
        consumer.register_concurrently(listener)
        await consumer.start()
        try:
            result = await producer.send(Message("PyTraced", b"py", tags="TagP",
                                                 keys=["pykey-1"]))
            await asyncio.wait_for(consumed.wait(), 60)
        finally:
            await consumer.shutdown()  # sends the traces still queued
    finally:
        await producer.shutdown()
    run = await asyncio.create_subprocess_exec(
        str(Path(HOME, "mqadmin.sh")), "queryMsgTraceById", "-n", apache, "-i", result.msg_id,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out, _ = await asyncio.wait_for(run.communicate(), 120)
    rows = [line.split() for line in out.decode().splitlines()]
    assert ["Pub", "PyTracePG"] in [row[:2] for row in rows], out
    assert ["Sub", "PyTraceCG"] in [row[:2] for row in rows], out
    assert all(row[-1] == "success" for row in rows if row[:1] in (["Pub"], ["Sub"])), out


async def test_print_msg_keeps_to_the_time_range_on_apache_s_broker(apache: str) -> None:
    """Apache's broker answers SEARCH_OFFSET_BY_TIMESTAMP with the offset stored nearest the
    time: a range starting just after one message and ending just after another is found by
    the messages' store times, not by those offsets alone."""
    producer = Producer("PyPrintPG", ClientConfig(namesrv_addr=apache))
    await producer.start()
    try:
        first = await producer.send(Message("PyPrinted", b"a"))
        mq = first.message_queue

        async def stored(body: bytes) -> tuple[str, int]:
            result = await producer.send_to_queue(Message("PyPrinted", body), mq)
            async with MQAdmin(apache) as admin:
                [found] = await find_by_id(admin, result.offset_msg_id)
            return result.msg_id, found.record.store_timestamp

        _, a_time = await stored(b"before")
        await asyncio.sleep(1.5)
        inside = [await stored(b"in-1"), await stored(b"in-2")]
        await asyncio.sleep(1.5)
        await stored(b"after")
    finally:
        await producer.shutdown()
    begin, end = a_time + 100, inside[-1][1] + 100  # each nearest the message before it
    async with MQAdmin(apache) as admin:
        page = await print_msg(admin, "PyPrinted", begin=begin, end=end)
    assert [m.record.msg_id for m in page.messages] == [msg_id for msg_id, _ in inside]

"""Our trace records against Apache's own TraceDataEncoder (opt-in: needs the Apache build
named by APACHE_RMQ_HOME, see docs, and a JDK): its encoder writes our golden strings, and its
decoder reads what our hooks record."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from engine.client.core.instance import ClientInstance
from engine.client.core.message import Message, MessageExt
from engine.client.core.results import ConsumeConcurrentlyStatus, SendResult, SendStatus
from engine.client.produce.producer import trace_producer
from engine.client.trace.dispatch import TraceDispatcher
from engine.client.trace.hooks import ConsumeTracer, SendTracer, now_ms, traced_listener
from engine.protocol.body.message_queue import MessageQueue
from tests.protocol.test_trace_codec import (
    END_TX_GOLDEN,
    PUB_GOLDEN,
    SUB_AFTER_GOLDEN,
    SUB_BEFORE_GOLDEN,
)

HOME = os.environ.get("APACHE_RMQ_HOME", "")
JAVAC = shutil.which("javac")
pytestmark = pytest.mark.skipif(not (HOME and Path(HOME, "classpath").is_file() and JAVAC),
                                reason="needs APACHE_RMQ_HOME (the Apache build) and javac")

#: Encodes the golden tests' records with Apache's classes; with a file argument, decodes it
#: and prints one line per record: type|time|group|msgId|topic|tags|keys|cost|success|
#: storeHost|offsetMsgId|requestId|contextCode|msgType|retryTimes|transactionState
HARNESS = r"""
import java.nio.file.*;
import java.util.*;
import org.apache.rocketmq.client.AccessChannel;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.trace.*;
import org.apache.rocketmq.common.message.MessageType;

public class TraceCodec {
    static final String ID = "AC1415116D1418B4AAC217FE1B4E0000";
    static final long T = 1700000000123L;

    static TraceBean bean(String topic, String tags, String keys) {
        TraceBean b = new TraceBean();
        b.setTopic(topic);
        b.setTags(tags);
        b.setKeys(keys);
        b.setMsgId(ID);
        return b;
    }

    static TraceContext context(TraceType type, long time, String region, String group,
                                TraceBean bean) {
        TraceContext c = new TraceContext();
        c.setTraceType(type);
        c.setTimeStamp(time);
        c.setRegionId(region);
        c.setGroupName(group);
        c.setAccessChannel(AccessChannel.LOCAL);
        c.setTraceBeans(new ArrayList<>(List.of(bean)));
        return c;
    }

    static String enc(TraceContext c) {
        return TraceDataEncoder.encoderFromContextBean(c).getTransData();
    }

    static void decode(String path) throws Exception {
        String data = new String(Files.readAllBytes(Paths.get(path)), "UTF-8");
        for (TraceContext c : TraceDataEncoder.decoderFromTraceDataString(data)) {
            TraceBean b = c.getTraceBeans().get(0);
            Object[] fields = {c.getTraceType(), c.getTimeStamp(), c.getGroupName(),
                b.getMsgId(), b.getTopic(), b.getTags(), b.getKeys(), c.getCostTime(),
                c.isSuccess(), b.getStoreHost(), b.getOffsetMsgId(), c.getRequestId(),
                c.getContextCode(), b.getMsgType(), b.getRetryTimes(),
                b.getTransactionState()};
            StringJoiner line = new StringJoiner("|");
            for (Object f : fields) {
                line.add(String.valueOf(f));
            }
            System.out.println(line);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0) {
            decode(args[0]);
            return;
        }
        TraceBean pb = bean("topic-test", "Tags", "Keys");
        pb.setStoreHost("127.0.0.1:10911");
        pb.setBodyLength(26);
        pb.setMsgType(MessageType.Normal_Msg);
        pb.setOffsetMsgId("0A9A002600002A9F0000000000002329");
        TraceContext pub = context(TraceType.Pub, T, "DefaultRegion", "PID-test", pb);
        pub.setCostTime(245);
        pub.setSuccess(true);
        TraceBean bb = bean("topic-test", null, "K1 K2");
        bb.setRetryTimes(2);
        TraceContext sb = context(TraceType.SubBefore, T, "DefaultRegion", "CID-test", bb);
        sb.setRequestId("REQ1");
        TraceContext sa = context(TraceType.SubAfter, T + 20, "", "CID-test", bb);
        sa.setRequestId("REQ1");
        sa.setCostTime(17);
        sa.setSuccess(false);
        sa.setContextCode(4);
        TraceBean eb = bean("topic-test", null, null);
        eb.setStoreHost("127.0.0.1:10911");
        eb.setMsgType(MessageType.Trans_msg_Commit);
        eb.setTransactionId("transactionId");
        eb.setTransactionState(LocalTransactionState.COMMIT_MESSAGE);
        eb.setFromTransactionCheck(false);
        TraceContext et = context(TraceType.EndTransaction, T, "DefaultRegion", "PID-test", eb);
        for (TraceContext c : List.of(pub, sb, sa, et)) {
            System.out.println(enc(c));
        }
    }
}
"""

def _java(tmp_path: Path, *args: str) -> str:
    classpath = Path(HOME, "classpath").read_text().strip()
    src = tmp_path / "TraceCodec.java"
    if not src.exists():
        src.write_text(HARNESS)
        subprocess.run([str(JAVAC), "-nowarn", "-cp", classpath, "-d", str(tmp_path), str(src)],
                       check=True, capture_output=True)
    java = str(Path(str(JAVAC)).with_name("java"))
    out = subprocess.run([java, "-cp", f"{tmp_path}:{classpath}", "TraceCodec", *args],
                         check=True, capture_output=True, text=True)
    return out.stdout


def test_apache_s_encoder_writes_the_golden_strings(tmp_path: Path) -> None:
    lines = _java(tmp_path).split("\n")[:4]
    assert lines == [PUB_GOLDEN, SUB_BEFORE_GOLDEN, SUB_AFTER_GOLDEN, END_TX_GOLDEN]


async def test_apache_s_decoder_reads_what_our_hooks_record(tmp_path: Path) -> None:
    dispatcher = TraceDispatcher(trace_producer(ClientInstance(), "G", "PRODUCER"))
    sender = SendTracer(dispatcher, "PG")
    sender.sent(Message("T", b"body", keys=["a", "b"], delay_time_level=2),
                SendResult(SendStatus.SEND_OK, "7F0000010001", "0A9A002600002A9F0000000000002329",
                           MessageQueue("T", "b", 0), 5), "127.0.0.1:10911", now_ms() - 7)
    sender.ended(topic="T", tags="tg", keys=None, msg_id="7F0000010001", transaction_id="tx",
                 state="ROLLBACK_MESSAGE", broker_addr="10.0.0.1:10911", region_id=None,
                 from_check=True)
    msg = MessageExt("T", b"x", {"KEYS": "a b", "UNIQ_KEY": "7F0000010001"}, "b", 0, 0, 0, 0,
                     0, 0, ("127.0.0.1", 1), 0, ("127.0.0.1", 2), 3, 0)
    listener = traced_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.RECONSUME_LATER,
                               ConsumeTracer(dispatcher, "CG", 900_000))
    listener([msg], None)
    texts, _ = dispatcher._take()
    body = tmp_path / "body.txt"
    body.write_text("".join(texts), encoding="utf-8")
    rows = [line.split("|") for line in _java(tmp_path, str(body)).splitlines()]
    assert [r[0] for r in rows] == ["Pub", "EndTransaction", "SubBefore", "SubAfter"]
    pub, end, before, after = rows
    assert (pub[2], pub[3], pub[6], pub[8], pub[9], pub[13]) == (
        "PG", "7F0000010001", "a b", "true", "127.0.0.1:10911", "Delay_Msg")
    assert (end[5], end[9], end[13], end[15]) == (
        "tg", "10.0.0.1:10911", "Trans_msg_Commit", "ROLLBACK_MESSAGE")
    assert (before[2], before[14]) == ("CG", "3")
    assert (after[8], after[11], after[12]) == ("false", before[11], "4")

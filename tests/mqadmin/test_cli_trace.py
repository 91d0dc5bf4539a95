"""queryMsgTraceById against a broker with traceTopicEnable: our traced clients' records,
records written as Apache's 5.x Java client writes them, ids with no trace."""

from __future__ import annotations

from engine.protocol.trace import TRACE_TOPIC
from mqadmin.exit_codes import ExitCode

from .cli import invoke, json_rows
from .conftest import BackgroundCluster
from .trace_helpers import TOPIC, send_and_consume

C, F = "\u0001", "\u0002"  # Apache's TraceConstants.CONTENT_SPLITOR, FIELD_SPLITOR


def test_traces_of_our_producer_and_consumer_are_read_back(traced: BackgroundCluster) -> None:
    result = send_and_consume(traced)
    rows = json_rows("queryMsgTraceById", "-i", result.msg_id, "-n", traced.ns)
    assert [r["type"] for r in rows] == ["Pub", "SubBefore", "SubAfter"]
    pub, before, after = rows
    assert (pub["group"], pub["topic"], pub["tags"], pub["keys"]) == (
        "OrderPG", TOPIC, "created", "order-1")
    assert (pub["status"], pub["storeHost"], pub["msgType"]) == (
        "success", traced.broker_addr, "NORMAL")
    assert pub["offsetMsgId"] == result.offset_msg_id
    assert pub["clientHost"].startswith("127.0.0.1:")
    assert isinstance(pub["costMs"], int) and pub["time"]
    assert (before["group"], before["retryTimes"], before["status"]) == ("OrderCG", 0, None)
    assert (after["group"], after["status"], after["requestId"]) == (
        "OrderCG", "success", before["requestId"])
    assert isinstance(after["costMs"], int)
    assert pub["timestamp"] <= before["timestamp"] <= after["timestamp"]
    assert {r["msgId"] for r in rows} == {result.msg_id}

    table = invoke("queryMsgTraceById", "-i", result.msg_id, "-n", traced.ns)
    assert table.exit_code == 0, table.stderr
    assert "OrderPG" in table.stdout and "SubAfter" in table.stdout

    # the offset message id finds the same trace, and says which id the trace is kept under
    by_offset = invoke("queryMsgTraceById", "-i", result.offset_msg_id, "-n", traced.ns,
                       "-o", "json")
    assert by_offset.exit_code == 0, by_offset.stderr
    assert result.msg_id in by_offset.stderr
    assert [r["type"] for r in json_rows("queryMsgTraceById", "-i", result.offset_msg_id,
                                         "-n", traced.ns)] == ["Pub", "SubBefore", "SubAfter"]


def test_records_written_by_apache_s_java_client_are_read(traced: BackgroundCluster) -> None:
    msg_id = "7F00000100002A9F0000000000000ABC"
    # as Apache's 5.x client writes them (TraceDataEncoder.encoderFromContextBean, plus the
    # clientHost a 5.x Pub may carry), sent as AsyncTraceDispatcher does: KEYS = the ids
    body = (f"Pub{C}1700000000000{C}DefaultRegion{C}JavaPG{C}{TOPIC}{C}{msg_id}{C}null{C}"
            f"k1{C}10.0.0.5:10911{C}12{C}3{C}0{C}0A00000500002A9F0000000000000001{C}true{C}"
            f"10.0.0.9{F}"
            f"SubBefore{C}1700000000050{C}DefaultRegion{C}JavaCG{C}REQ{C}{msg_id}{C}1{C}k1{F}"
            f"SubAfter{C}REQ{C}{msg_id}{C}8{C}false{C}k1{C}4{C}1700000000058{C}JavaCG{F}"
            f"SubAfter{C}OTHER{C}7F00000100002A9F0000000000000DEF{C}1{C}true{C}null{C}0{C}"
            f"1700000000060{C}JavaCG{F}")
    traced.send(TRACE_TOPIC, body.encode(), keys=f"{msg_id} 7F00000100002A9F0000000000000DEF k1")
    rows = json_rows("queryMsgTraceById", "-i", msg_id, "-n", traced.ns)
    assert [(r["type"], r["group"], r["status"]) for r in rows] == [
        ("Pub", "JavaPG", "success"), ("SubBefore", "JavaCG", None),
        ("SubAfter", "JavaCG", "failed")]
    assert (rows[0]["clientHost"], rows[0]["storeHost"], rows[0]["tags"]) == (
        "10.0.0.9", "10.0.0.5:10911", None)
    assert (rows[1]["retryTimes"], rows[2]["costMs"]) == (1, 8)


def test_an_id_without_trace_exits_3_and_says_so(traced: BackgroundCluster) -> None:
    unknown = invoke("queryMsgTraceById", "-i", "7F00000100002A9F0000000000000FFF",
                     "-n", traced.ns)
    assert unknown.exit_code == ExitCode.NOT_FOUND
    assert "no trace of message 7F00000100002A9F0000000000000FFF" in unknown.stderr
    assert "queryMsgByUniqueKey" in unknown.stderr and unknown.stdout == ""

    # a message that exists but was not traced: its offset id tells the broker holding it
    plain = traced.send(TOPIC, b"untraced")
    untraced = invoke("queryMsgTraceById", "-i", plain.offset_msg_id, "-n", traced.ns)
    assert untraced.exit_code == ExitCode.NOT_FOUND
    assert "the message exists" in untraced.stderr and plain.msg_id in untraced.stderr

    missing = invoke("queryMsgTraceById", "-i", plain.msg_id, "-t", "NO_SUCH_TRACE",
                     "-n", traced.ns)
    assert missing.exit_code == ExitCode.NOT_FOUND
    assert "trace topic NO_SUCH_TRACE does not exist" in missing.stderr


def test_a_5x_client_s_id_is_said_never_traced(traced: BackgroundCluster) -> None:
    # a 5.x client's id (34 hex digits, 01 first): it came through a gRPC proxy, which (as
    # Apache 5.3.3's) writes no trace records, so enabling trace would not help
    v5_id = "0102FC0000000113A30B1D1DF800000000"
    result = invoke("queryMsgTraceById", "-i", v5_id, "-n", traced.ns)
    assert result.exit_code == ExitCode.NOT_FOUND
    assert f"no trace of message {v5_id}" in result.stderr
    assert "a 5.x client sent it through a gRPC proxy" in result.stderr
    assert "enableMsgTrace" not in result.stderr

"""A POP answer read as 5.3's client reads it: each message's receipt from the offset infos."""

from __future__ import annotations

import pytest

from engine.client.core.errors import BadResponseError, ServerError
from engine.client.core.pop_calls import batch_ack_body
from engine.client.core.pop_codec import PopStatus, pop_result, receipt_of
from engine.protocol.codes import ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.pop import PopMessageRequestHeader
from engine.protocol.message import encode_record, properties_to_string
from engine.protocol.receipt import ExtraInfo

ADDR = "127.0.0.1:10911"


def _header(order: bool = False) -> PopMessageRequestHeader:
    return PopMessageRequestHeader("g", "t", -1, 32, 60_000, 0, 0, 0, "TAG", "*", order)


def _answer(records: list[bytes], **ext: str) -> RemotingCommand:
    fields = {"popTime": "1000", "invisibleTime": "60000", "reviveQid": "3", "restNum": "7"}
    fields.update(ext)
    return RemotingCommand(code=ResponseCode.SUCCESS, ext_fields=fields, body=b"".join(records))


def _record(topic: str, queue_id: int, offset: int, reconsume: int = 0) -> bytes:
    return encode_record(topic=topic, body=b"x", queue_id=queue_id, queue_offset=offset,
                         properties=properties_to_string({"TAGS": "a"}),
                         reconsume_times=reconsume)


def test_each_message_gets_the_receipt_of_its_checkpoint():
    cmd = _answer([_record("t", 1, 5), _record("t", 1, 6), _record("%RETRY%g_t", 0, 2, 1)],
                  startOffsetInfo="0 1 5;1 0 2", msgOffsetInfo="0 1 5,6;1 0 2")
    result = pop_result(cmd, _header(), "broker-a", ADDR)
    assert result.status is PopStatus.FOUND and result.rest_num == 7
    assert [m.properties["POP_CK"] for m in result.messages] == [
        "5 1000 60000 3 0 broker-a 1 5", "5 1000 60000 3 0 broker-a 1 6",
        "2 1000 60000 3 1 broker-a 0 2"]
    retry = result.messages[2]
    assert retry.topic == "t" and retry.queue_topic == "%RETRY%g_t"
    assert retry.reconsume_times == 1
    assert receipt_of(retry).topic("t", "g") == "%RETRY%g_t"
    assert result.messages[0].properties["1ST_POP_TIME"] == "1000"


def test_a_retry_message_the_broker_re_encoded_keeps_the_receipt_it_came_with():
    given = "2 1000 60000 3 1 broker-a 0 2"
    record = encode_record(topic="t", body=b"x", queue_id=0, queue_offset=2,
                           properties=properties_to_string({"POP_CK": given}))
    cmd = _answer([_record("t", 0, 7), record], startOffsetInfo="0 0 7;1 0 2",
                  msgOffsetInfo="0 0 7;1 0 2")
    first, retried = pop_result(cmd, _header(), "broker-a", ADDR).messages
    assert first.properties["POP_CK"] == "7 1000 60000 3 0 broker-a 0 7"
    assert retried.properties["POP_CK"] == given
    assert receipt_of(retried).topic("t", "g") == "%RETRY%g_t"


def test_fifo_messages_carry_their_pop_count():
    cmd = _answer([_record("t", 0, 9), _record("t", 0, 10)], startOffsetInfo="0 0 9",
                  msgOffsetInfo="0 0 9,10", orderCountInfo="0 qo0%9 2;0 0 1")
    msgs = pop_result(cmd, _header(order=True), "b", ADDR).messages
    assert [m.reconsume_times for m in msgs] == [2, 1]


@pytest.mark.parametrize("code,status", [(208, PopStatus.NO_NEW_MSG),
                                         (209, PopStatus.POLLING_FULL),
                                         (210, PopStatus.POLLING_NOT_FOUND),
                                         (19, PopStatus.POLLING_NOT_FOUND)])
def test_empty_answers_are_results(code, status):
    cmd = RemotingCommand(code=code, ext_fields={"popTime": "0", "invisibleTime": "0",
                                                 "reviveQid": "0", "restNum": "0"})
    assert pop_result(cmd, _header(), "b", ADDR).status is status
    assert pop_result(RemotingCommand(code=code), _header(), "b", ADDR).status is status


def test_a_refusal_raises_and_a_broken_answer_says_so():
    with pytest.raises(ServerError):
        pop_result(RemotingCommand(code=ResponseCode.NO_PERMISSION, remark="no"), _header(),
                   "b", ADDR)
    broken = _answer([_record("t", 1, 5)], startOffsetInfo="0 1 5", msgOffsetInfo="0 1")
    with pytest.raises(BadResponseError):
        pop_result(broken, _header(), "b", ADDR)


def test_batch_ack_groups_receipts_by_checkpoint():
    receipts = [ExtraInfo(5, 1000, 60_000, 3, "0", "b", 1, o) for o in (5, 7)]
    receipts.append(ExtraInfo(2, 1000, 60_000, 3, "1", "b", 0, 2))
    body = batch_ack_body("g", "t", receipts)
    assert body.broker_name == "b"
    assert [(a.retry, a.start_offset, a.offsets()) for a in body.acks] == [
        ("0", 5, [5, 7]), ("1", 2, [2])]

"""Revive-topic records as Apache 5.3.3 writes them, the checkpoint book, and FIFO order info."""

from __future__ import annotations

import orjson

from engine.broker.pop.book import CheckpointBook
from engine.broker.pop.order import OrderInfo, build_offset_list
from engine.broker.pop.records import AckMsg, PopCheckPoint

# Written by Apache 5.3.3's broker (a pop of three messages, a change of invisible time, an ack)
APACHE_CK = (b'{"bm":0,"bn":"broker-ap","c":"CG1","d":[0,1,2],"it":4000,"n":3,'
             b'"pt":1795702196461,"q":0,"reviveTime":1795702200461,"ro":0,"so":0,'
             b'"t":"CmpTopic1795702196"}')
APACHE_CK_UNIQ = "CmpTopic1795702196@0@0@CG1@1795702196461@broker-ap@ck"
APACHE_ACK = (b'{"ao":1,"bn":"broker-ap","c":"CG1","pt":1795702196461,"q":0,"so":0,'
              b'"t":"CmpTopic1795702196"}')
APACHE_ACK_UNIQ = "CmpTopic1795702196@0@1@CG1@1795702196461@broker-ap@ack"


def test_checkpoint_and_ack_read_and_written_as_apache_does() -> None:
    ck = PopCheckPoint.from_json(APACHE_CK)
    assert (ck.topic, ck.cid, ck.queue_id, ck.start_offset, ck.num) == (
        "CmpTopic1795702196", "CG1", 0, 0, 3)
    assert ck.offsets() == [0, 1, 2] and ck.revive_time == 1795702200461
    assert orjson.loads(ck.to_json()) == orjson.loads(APACHE_CK)
    assert ck.unique_id() == APACHE_CK_UNIQ
    ack = AckMsg.from_json(APACHE_ACK)
    assert ack.ck_key == ck.key and ack.offsets() == (1,)
    assert orjson.loads(ack.to_json()) == orjson.loads(APACHE_ACK)
    assert ack.unique_id() == APACHE_ACK_UNIQ
    long_names = AckMsg.from_json(b'{"ackOffset":2,"startOffset":0,"consumerGroup":"CG1",'
                                  b'"topic":"T","queueId":0,"popTime":5}')
    assert (long_names.ack_offset, long_names.topic, long_names.pop_time) == (2, "T", 5)
    batch = AckMsg.from_json(b'{"aol":[0,2],"ao":-1,"c":"G","t":"T","q":1,"so":0,"pt":5}')
    assert batch.is_batch and batch.offsets() == (0, 2) and batch.tag == "bAck"


def test_checkpoint_offsets_with_gaps_and_old_style() -> None:
    gaps = PopCheckPoint("T", "G", 0, 10, 1, 1000, 3, (0, 2, 5))
    assert gaps.offsets() == [10, 12, 15]
    assert [gaps.index_of_ack(o) for o in (10, 11, 15, 9)] == [0, -1, 2, -1]
    old = PopCheckPoint("T", "G", 0, 10, 1, 1000, 3)  # before 4.9.3: consecutive, no "d"
    assert old.offsets() == [10, 11, 12] and old.index_of_ack(13) == -1


def test_book_tracks_in_flight_and_the_revive_progress() -> None:
    book = CheckpointBook()
    a = PopCheckPoint("T", "G", 0, 0, 100, 1000, 2, (0, 1), broker_name="b")
    b = PopCheckPoint("T", "G", 1, 0, 200, 500, 1, (0,), broker_name="b")
    book.add(a, 3, 7)
    book.add(b, 3, 9)
    assert book.inflight("T", "G", 0) == 2 and book.oldest_offset(3) == 7
    assert [e.ck for e in book.due(700)] == [b]  # b falls due first (200 + 500)
    assert book.ack(a.key, [0]) == 1 and book.ack(a.key, [0]) == 0  # twice counts once
    assert book.ack(a.key, [1]) == 1  # all acked: a leaves the book
    assert book.oldest_offset(3) == 9 and book.inflight("T", "G", 0) == 0
    assert book.ack(("T", "G", 9, 9, 9, "b"), [9]) == 0  # unknown checkpoint: nothing


def test_order_info_json_and_blocking() -> None:
    assert build_offset_list([5, 6, 9]) == [5, 1, 4]
    info = OrderInfo(1000, 3000, build_offset_list([5, 6]), 1000, attempt_id="A")
    assert info.need_block("B", 3000, now=2000) and not info.need_block("A", 3000, now=2000)
    assert not info.need_block("B", 3000, now=4000)  # its invisible time is over
    info.commit_offset_bit |= 1
    assert info.next_offset() == 6
    doc = info.to_json()
    assert doc == {"popTime": 1000, "i": 3000, "o": [5, 1], "l": 1000, "cm": 1, "a": "A"}
    assert OrderInfo.from_json(doc) == info


def test_acks_of_one_checkpoint_read_together_become_one_batch_ack() -> None:
    from engine.broker.handlers.pop_ack import _merged

    def ack(queue_id: int, offset: int, pop_time: int = 1000) -> AckMsg:
        return AckMsg("T", "G", queue_id, 10, pop_time, "broker-a", offset)

    records = [(ack(0, 11), 3), (ack(1, 20), 3), (ack(0, 12), 3), (ack(0, 11), 3),
               (ack(0, 13, pop_time=2000), 3), (ack(0, 14), 5)]
    merged, which = _merged(records)
    assert which == [0, 1, 0, 0, 2, 3]
    batch, qid = merged[0]
    assert qid == 3 and batch.is_batch and batch.offsets() == (11, 12)  # 11 twice: once
    assert batch.tag == "bAck" and batch.ck_key == ack(0, 11).ck_key
    assert [(m.is_batch, m.offsets(), q) for m, q in merged[1:]] == [
        (False, (20,), 3), (False, (13,), 3), (False, (14,), 5)]

"""Acks and invisibility changes of popped messages (5.3 `AckMessageProcessor`,
`ChangeInvisibleTimeProcessor`).

How this works: an ack of a normal pop is an ack record in the receipt's revive queue; it clears
the message in the checkpoint book, so the revive service leaves it alone.  An ack whose
checkpoint is gone (revived already, or never written) is stored all the same and answered
SUCCESS, as 5.3 does: the message has come back through the retry topic, or will.  An ack of
a FIFO pop (revive queue 999) marks the offset in the order info and moves the consumer offset
to the first offset not yet acked, which frees the queue for the next pop once all are acked.
Changing a message's invisibility writes a new checkpoint of that one message (popped now,
invisible for the new time) and then acks it under the old receipt; the new receipt's pop
time and invisible time are in the answer.  For a FIFO message it records the message's next
visible time in the order info instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.broker.offsets import ConsumerOffsetManager
from engine.broker.pop.order import ILLEGAL, ConsumerOrderInfoManager
from engine.broker.pop.records import AckMsg, PopCheckPoint
from engine.broker.pop.revive_log import ReviveLog
from engine.protocol.codes import ResponseCode
from engine.protocol.receipt import ExtraInfo
from engine.store.results import PutMessageResult


@dataclass(frozen=True, slots=True)
class AckOutcome:
    code: int = ResponseCode.SUCCESS
    remark: str | None = None
    acked: int = 0  # messages that were still in flight


@dataclass(frozen=True, slots=True)
class Changed:
    """The answer to CHANGE_MESSAGE_INVISIBLETIME: the new receipt's times, or a refusal."""

    code: int
    pop_time: int = 0
    invisible_time: int = 0
    revive_qid: int = 0
    remark: str | None = None


class Acker:
    def __init__(self, offsets: ConsumerOffsetManager, clock: Callable[[], int],
                 revive_log: ReviveLog, order: ConsumerOrderInfoManager,
                 queue_freed: Callable[[str, str, int], None]) -> None:
        self.offsets = offsets
        self.clock = clock
        #: Where acks and the checkpoints of changed invisible times are written.
        self.revive_log = revive_log
        self.order = order
        #: Called with (topic, group, queue id) when a FIFO ack unblocks a queue.
        self.queue_freed = queue_freed

    def ack(self, group: str, topic: str, queue_id: int, offsets: list[int],
            info: ExtraInfo, start_offset: int, broker_name: str) -> AckOutcome:
        """Ack `offsets` of one queue popped under one checkpoint (or one FIFO pop)."""
        if info.is_order:
            acked = 0
            for offset in offsets:
                outcome = self.ack_orderly(group, topic, queue_id, offset, info)
                if outcome.code != ResponseCode.SUCCESS:
                    return outcome
                acked += outcome.acked
            return AckOutcome(acked=acked)
        record = self.ack_record(group, topic, queue_id, offsets, info, start_offset,
                                 broker_name)
        if record is None:
            return AckOutcome()
        return self.outcome(*self.revive_log.append_ack(*record))

    def ack_record(self, group: str, topic: str, queue_id: int, offsets: list[int],
                   info: ExtraInfo, start_offset: int, broker_name: str
                   ) -> tuple[AckMsg, int] | None:
        """The ack record of a normal pop's receipt and its revive queue; None when there is
        nothing to write (no offsets, or a revive queue no checkpoint of this broker is in)."""
        if not offsets or not self.revive_log.tracks(info.revive_qid):
            return None
        ack = AckMsg(topic, group, queue_id, start_offset, info.pop_time, broker_name,
                     offsets[0] if len(offsets) == 1 else -1,
                     tuple(offsets) if len(offsets) > 1 else ())
        return ack, info.revive_qid

    @staticmethod
    def outcome(result: PutMessageResult, acked: int) -> AckOutcome:
        if not result.ok:
            return AckOutcome(ResponseCode.SYSTEM_ERROR,
                              f"the ack was not stored: {result.status} {result.error_message}")
        return AckOutcome(acked=acked)

    def ack_orderly(self, group: str, topic: str, queue_id: int, offset: int,
                    info: ExtraInfo) -> AckOutcome:
        old = self.offsets.query(group, topic, queue_id)
        if offset < old:
            return AckOutcome()
        order = self.order
        next_offset = order.commit_and_next(topic, group, queue_id, offset, info.pop_time)
        if next_offset == ILLEGAL:
            return AckOutcome(ResponseCode.MESSAGE_ILLEGAL,
                              f"offset is illegal, key:{topic}@{group}@{queue_id}, old:{old}, "
                              f"commit:{offset}, next:{next_offset}")
        if next_offset >= 0:
            self.offsets.commit(group, topic, queue_id, next_offset)
            if not order.check_block(None, topic, group, queue_id, info.invisible_time):
                self.queue_freed(topic, group, queue_id)
            return AckOutcome(acked=1)
        return AckOutcome()

    def change_invisible_time(self, group: str, topic: str, queue_id: int, offset: int,
                              info: ExtraInfo, invisible_time: int) -> Changed:
        now = self.clock()
        if info.is_order:
            if offset >= self.offsets.query(group, topic, queue_id):
                visible_at = now + invisible_time
                self.order.update_next_visible_time(topic, group, queue_id, offset,
                                                    info.pop_time, visible_at)
                return Changed(ResponseCode.SUCCESS, info.pop_time, visible_at - info.pop_time,
                               info.revive_qid)
            return Changed(ResponseCode.SUCCESS, info.pop_time, info.invisible_time,
                           info.revive_qid)
        revive_qid = info.revive_qid
        if not self.revive_log.tracks(revive_qid):
            revive_qid = self.revive_log.next_revive_qid()
        if offset == info.ck_queue_offset and now <= info.pop_time:
            # The new checkpoint would have the old one's name, and the ack of the old one
            # below would clear it: pop it a millisecond later.
            now = info.pop_time + 1
        ck = PopCheckPoint(topic, group, queue_id, offset, now, invisible_time, 1, (0,),
                           broker_name=info.broker_name)
        if not self.revive_log.append_ck(ck, revive_qid):
            return Changed(ResponseCode.SYSTEM_ERROR,
                           remark="the new checkpoint was not stored; the receipt is unchanged")
        outcome = self.ack(group, topic, queue_id, [offset], info, info.ck_queue_offset,
                           info.broker_name)
        if outcome.code != ResponseCode.SUCCESS:
            return Changed(outcome.code, remark=outcome.remark)
        return Changed(ResponseCode.SUCCESS, now, invisible_time, revive_qid)

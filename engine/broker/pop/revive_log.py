"""`ReviveLog`: writes checkpoints and acks to the revive topic and reads them back after a restart.

How this works: each record is a message of `rmq_sys_REVIVE_LOG_<cluster>`, queue `reviveQid`,
tagged `ck`, `ack` or `bAck`, its body the JSON of `engine.broker.pop.records` and its UNIQ_KEY
5.3's unique id — what 5.3 writes, except that 5.3 also gives each record a timer delivery time
(the checkpoint's revive time) so that its revive service only meets records when they are due;
here they are stored at once and the `CheckpointBook` keeps the pending ones in memory.  A
record written is entered in the book at once.  Successive checkpoints go round the revive
queues (5.3 `ckMessageNumber`); an ack goes to its checkpoint's queue.  `replay` reads a
revive queue from a given offset to its end and enters what it finds, which rebuilds the book
after a restart or on a slave that becomes master.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from engine.broker.pop.book import CheckpointBook
from engine.broker.pop.names import ACK_TAG, BATCH_ACK_TAG, CK_TAG, REVIVE_GROUP
from engine.broker.pop.records import AckMsg, PopCheckPoint
from engine.protocol.errors import ProtocolError
from engine.protocol.message import (
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    Address,
    BrokerMessage,
    decode_record,
    properties_to_string,
)
from engine.store.message_store import MessageStore
from engine.store.results import PutMessageResult

log = logging.getLogger(__name__)

#: Records read per store call while replaying.
REPLAY_BATCH = 32


@dataclass(frozen=True, slots=True)
class Replayed:
    """What one replay of a revive queue met."""

    checkpoints: list[PopCheckPoint]
    acks: int
    end: int  # the queue offset after the last record read


class ReviveLog:
    def __init__(self, store: MessageStore, topic: str, queue_num: int, book: CheckpointBook,
                 broker_name: str, store_host: Callable[[], Address], clock: Callable[[], int],
                 on_checkpoint: Callable[[PopCheckPoint], None]) -> None:
        self.store = store
        self.broker_name = broker_name
        self.topic = topic
        #: Fixed at start, as 5.3's revive services are.
        self.revive_queue_num = queue_num
        #: Revive queues replayed and tracked: the configured ones, and any other the revive
        #: topic holds (reviveQueueNum lowered between two runs: their checkpoints still count).
        self.revive_qids: list[int] = list(range(queue_num))
        self.book = book
        self.store_host = store_host
        self.clock = clock
        #: Told of each checkpoint stored (the revive service wakes if it falls due sooner).
        self.on_checkpoint = on_checkpoint
        self._ck_number = 0
        #: Records appended so far, and the result of the last one (SYNC_FLUSH waits on it).
        self.appended = 0
        self.last: PutMessageResult | None = None

    def tracks(self, revive_qid: int) -> bool:
        """Whether checkpoints of this revive queue can be in the book."""
        return revive_qid in self.revive_qids or 0 <= revive_qid < self.revive_queue_num

    def next_revive_qid(self) -> int:
        """The revive queue of the next pop's checkpoint: they go round the queues."""
        qid = self._ck_number % self.revive_queue_num
        self._ck_number += 1
        return qid

    def _appended(self, result: PutMessageResult) -> None:
        if result.ok:
            self.appended += 1
            self.last = result

    def _message(self, revive_qid: int, tag: str, uniq: str, body: bytes) -> BrokerMessage:
        host = self.store_host()
        props = properties_to_string({PROPERTY_TAGS: tag,
                                      PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq})
        return BrokerMessage(self.topic, body, revive_qid, properties=props,
                             born_timestamp=self.clock(), born_host=host, store_host=host)

    def append_ck(self, ck: PopCheckPoint, revive_qid: int) -> bool:
        """Store a checkpoint and enter it in the book; False when the store refused it."""
        result = self.store.append_message(
            self._message(revive_qid, CK_TAG, ck.unique_id(), ck.to_json()))
        self._appended(result)
        if not result.ok:
            log.error("checkpoint %s not stored: %s %s", ck.unique_id(), result.status,
                      result.error_message)
            return False
        self.book.add(ck, revive_qid, result.queue_offset)
        self.on_checkpoint(ck)
        return True

    def append_ack(self, ack: AckMsg, revive_qid: int) -> tuple[PutMessageResult, int]:
        """Store an ack (or batch ack) and apply it to the book; also returns how many of
        the named messages were still open."""
        result = self.store.append_message(
            self._message(revive_qid, ack.tag, ack.unique_id(), ack.to_json()))
        self._appended(result)
        if not result.ok:
            log.error("ack %s not stored: %s %s", ack.unique_id(), result.status,
                      result.error_message)
            return result, 0
        return result, self.book.ack(ack.ck_key, ack.offsets())

    def append_acks(self, acks: list[tuple[AckMsg, int]]) -> list[tuple[PutMessageResult, int]]:
        """`append_ack` for many (ack, revive queue) at once: one store append for all."""
        msgs = [self._message(qid, ack.tag, ack.unique_id(), ack.to_json()) for ack, qid in acks]
        out = []
        for (ack, _), result in zip(acks, self.store.append_many(msgs), strict=True):
            self._appended(result)
            if result.ok:
                out.append((result, self.book.ack(ack.ck_key, ack.offsets())))
            else:
                log.error("ack %s not stored: %s %s", ack.unique_id(), result.status,
                          result.error_message)
                out.append((result, 0))
        return out

    def replay(self, revive_qid: int, start: int) -> Replayed:
        """Enter every checkpoint and ack of a revive queue from offset `start` to its end."""
        store = self.store
        offset = max(start, store.get_min_offset_in_queue(self.topic, revive_qid))
        end = store.get_max_offset_in_queue(self.topic, revive_qid)
        cks: list[PopCheckPoint] = []
        acks = 0
        while offset < end:
            result = store.get_message(REVIVE_GROUP, self.topic, revive_qid, offset, REPLAY_BATCH)
            if not result.messages:
                if result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
                continue
            for queue_offset, raw in zip(result.queue_offsets, result.messages, strict=True):
                acks += self._enter(revive_qid, queue_offset, raw, cks)
            offset = result.next_begin_offset
        return Replayed(cks, acks, offset)

    def _enter(self, revive_qid: int, queue_offset: int, raw: bytes,
               cks: list[PopCheckPoint]) -> int:
        try:
            record = decode_record(raw)
            tag = record.properties().get(PROPERTY_TAGS)
            if tag == CK_TAG:
                ck = PopCheckPoint.from_json(record.body)
                self.book.add(ck, revive_qid, queue_offset)
                cks.append(ck)
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                ack = AckMsg.from_json(record.body)
                if not ack.broker_name:  # 5.3: an ack without one names this broker
                    ack = replace(ack, broker_name=self.broker_name)
                self.book.ack(ack.ck_key, ack.offsets())
                return 1
        except ProtocolError as exc:
            log.error("revive queue %d offset %d: unreadable record skipped (%s)", revive_qid,
                      queue_offset, exc)
        return 0

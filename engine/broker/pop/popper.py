"""One POP, PEEK or NOTIFICATION check over the queues of a topic and its pop retry topic
(5.3 `PopMessageProcessor.popMsgFromQueue`, `PeekMessageProcessor`, `NotificationProcessor`).

How this works: a pop reads each queue from the group's pop offset: the committed consumer
offset, or for a new group the start 5.3 picks (`initial_offset`).  What it reads from a queue
is covered by one checkpoint in the revive topic, and the consumer offset moves past it at once
(5.3 moves it once the checkpoint is stored).  A FIFO pop writes no checkpoint: it records the
offsets in the order info, which blocks the queue until they are acked, and leaves the
consumer offset at the first of them until the acks move it.  Messages read from the pop retry
topic are handed out under the topic the client asked for, with their receipt in POP_CK,
unless popResponseReturnActualRetryTopic.  All of it is synchronous: a pop is one step of the
event loop, so no two pops interleave on a queue.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.broker.config import BrokerConfig
from engine.broker.offsets import ConsumerOffsetManager
from engine.broker.pop.order import ConsumerOrderInfoManager
from engine.broker.pop.records import PopCheckPoint
from engine.broker.pop.revive_log import ReviveLog
from engine.broker.topics import TopicConfigManager
from engine.protocol import receipt
from engine.protocol.header.pop import INIT_MODE_MIN
from engine.protocol.message import (
    PROPERTY_POP_CK,
    RETRY_GROUP_TOPIC_PREFIX,
    decode_record,
    encode_record,
    properties_to_string,
)
from engine.protocol.receipt import POP_ORDER_REVIVE_QUEUE, build_extra_info
from engine.store.message_filter import MessageFilter
from engine.store.message_store import MessageStore
from engine.store.results import GetMessageResult, GetMessageStatus

_S = GetMessageStatus
_BAD_OFFSET = (_S.OFFSET_TOO_SMALL, _S.OFFSET_OVERFLOW_BADLY, _S.OFFSET_FOUND_NULL)
_SKIPPED = (_S.NO_MATCHED_MESSAGE, _S.OFFSET_FOUND_NULL, _S.MESSAGE_WAS_REMOVING,
            _S.NO_MATCHED_LOGIC_QUEUE)


@dataclass(frozen=True, slots=True)
class PopRequest:
    group: str
    topic: str
    queue_id: int  # -1: every readable queue
    max_nums: int
    invisible_time: int
    init_mode: int
    order: bool = False
    attempt_id: str | None = None
    message_filter: MessageFilter | None = None


@dataclass(slots=True)
class PopBatch:
    """What one pop handed out, and the header fields of its answer."""

    pop_time: int
    revive_qid: int
    messages: list[bytes] = field(default_factory=list)
    rest_num: int = 0
    start_offset_info: list[str] = field(default_factory=list)
    msg_offset_info: list[str] = field(default_factory=list)
    order_count_info: list[str] = field(default_factory=list)
    #: (topic, queue id, messages, bytes) per queue popped, for the stats
    popped: list[tuple[str, int, int, int]] = field(default_factory=list)


class Popper:
    def __init__(self, store: MessageStore, offsets: ConsumerOffsetManager,
                 topics: TopicConfigManager, config: Callable[[], BrokerConfig],
                 clock: Callable[[], int], revive_log: ReviveLog,
                 order: ConsumerOrderInfoManager, inflight: Callable[[str, str, int], int]
                 ) -> None:
        self.store = store
        self.offsets = offsets
        self.topics = topics
        self.config = config
        self.clock = clock
        #: Where a pop's checkpoint is written (FIFO pops record theirs in `order`).
        self.revive_log = revive_log
        self.order = order
        #: Messages of a queue popped and not yet acked or revived (popInflightMessageThreshold).
        self.inflight = inflight
        self.random = random.Random()

    # ------------------------------------------------------------------ offsets

    def initial_offset(self, topic: str, queue_id: int, init_mode: int) -> int:
        """Where a group without an offset starts (5.3 `getInitOffset`): the queue's first
        message with initMode MIN and in retry topics; otherwise the last message, or the
        first when the queue is young (starts at 0 and its first message is still in memory,
        initPopOffsetByCheckMsgInMem)."""
        store = self.store
        if init_mode == INIT_MODE_MIN or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return store.get_min_offset_in_queue(topic, queue_id)
        if (self.config().init_pop_offset_by_check_msg_in_mem
                and store.get_min_offset_in_queue(topic, queue_id) <= 0
                and store.get_queue_entry(topic, queue_id, 0) is not None
                and not store.check_in_disk_by_consume_offset(topic, queue_id, 0)):
            return 0
        return max(store.get_max_offset_in_queue(topic, queue_id) - 1, 0)

    def pop_offset(self, group: str, topic: str, queue_id: int, init_mode: int,
                   init: bool) -> int:
        offset = self.offsets.query(group, topic, queue_id)
        if offset >= 0:
            return offset
        offset = self.initial_offset(topic, queue_id, init_mode)
        if init:
            self.offsets.commit(group, topic, queue_id, offset)
        return offset

    def peek_offset(self, group: str, topic: str, queue_id: int) -> int:
        """PEEK / NOTIFICATION: the committed offset, else the queue's first message."""
        offset = self.offsets.query(group, topic, queue_id)
        return offset if offset >= 0 else self.store.get_min_offset_in_queue(topic, queue_id)

    # ------------------------------------------------------------------ POP

    def retry_topics(self, topic: str, group: str, rand: int) -> str:
        """The pop retry topic this request reads (5.3: V1 for half of the requests while
        retrieveMessageFromPopRetryTopicV1 with enableRetryTopicV2)."""
        cfg = self.config()
        if (cfg.enable_retry_topic_v2 and cfg.retrieve_message_from_pop_retry_topic_v1
                and rand % 2 == 0):
            return receipt.pop_retry_topic(topic, group)
        return receipt.pop_retry_topic(topic, group, v2=cfg.enable_retry_topic_v2)

    def pop(self, req: PopRequest) -> PopBatch:
        rand = self.random.randrange(100)
        revive_qid = POP_ORDER_REVIVE_QUEUE if req.order else self.revive_log.next_revive_qid()
        batch = PopBatch(self.clock(), revive_qid)
        need_retry = rand < self.config().pop_from_retry_probability
        retry_topic = self.retry_topics(req.topic, req.group, rand)
        if need_retry and not req.order:
            self._pop_topic(req, batch, retry_topic, rand, is_retry=True)
        topic_config = self.topics.get(req.topic)
        if req.queue_id < 0:
            self._pop_topic(req, batch, req.topic, rand, is_retry=False)
        elif topic_config is not None:
            self._pop_queue(req, batch, req.topic, req.queue_id, is_retry=False)
        if not need_retry and len(batch.messages) < req.max_nums and not req.order:
            self._pop_topic(req, batch, retry_topic, rand, is_retry=True)
        return batch

    def _pop_topic(self, req: PopRequest, batch: PopBatch, topic: str, rand: int,
                   *, is_retry: bool) -> None:
        config = self.topics.get(topic)
        if config is None or config.read_queue_nums <= 0:
            return
        n = config.read_queue_nums
        for i in range(n):
            self._pop_queue(req, batch, topic, (rand + i) % n, is_retry=is_retry)

    def _should_stop(self, topic: str, group: str, queue_id: int) -> bool:
        cfg = self.config()
        if not cfg.enable_pop_message_threshold:
            return False
        return self.inflight(topic, group, queue_id) > cfg.pop_inflight_message_threshold

    def _pop_queue(self, req: PopRequest, batch: PopBatch, topic: str, queue_id: int,
                   *, is_retry: bool) -> None:
        store = self.store
        offset = self.pop_offset(req.group, topic, queue_id, req.init_mode, init=True)
        wanted = req.max_nums - len(batch.messages)
        if self._should_stop(topic, req.group, queue_id) or wanted <= 0:
            batch.rest_num += max(store.get_max_offset_in_queue(topic, queue_id) - offset, 0)
            return
        if req.order and self.order.check_block(req.attempt_id, topic, req.group, queue_id,
                                                req.invisible_time):
            return
        result = store.get_message(req.group, topic, queue_id, offset, wanted, req.message_filter)
        if result.status in _BAD_OFFSET:  # the stored offset is wrong: start where the store says
            offset = result.next_begin_offset
            self.offsets.commit(req.group, topic, queue_id, offset)
            result = store.get_message(req.group, topic, queue_id, offset, wanted,
                                       req.message_filter)
        if result.messages:
            if not self._hand_out(req, batch, topic, queue_id, offset, result, is_retry):
                batch.rest_num += len(result.messages)
                return
        elif result.status in _SKIPPED and result.next_begin_offset > offset:
            self.offsets.commit(req.group, topic, queue_id, result.next_begin_offset)
        batch.rest_num += max(result.max_offset - result.next_begin_offset, 0)

    def _hand_out(self, req: PopRequest, batch: PopBatch, topic: str, queue_id: int,
                  offset: int, result: GetMessageResult, is_retry: bool) -> bool:
        """Record the pop of `result` (checkpoint or order info) and add its messages."""
        queue_offsets = result.queue_offsets
        if req.order:
            batch.order_count_info += self.order.update(
                req.attempt_id, topic, req.group, queue_id, batch.pop_time, req.invisible_time,
                queue_offsets)
            self.offsets.commit(req.group, topic, queue_id, offset)
        else:
            ck = PopCheckPoint(topic, req.group, queue_id, offset, batch.pop_time,
                               req.invisible_time, len(queue_offsets),
                               tuple(o - offset for o in queue_offsets),
                               broker_name=self.config().broker_name)
            if not self.revive_log.append_ck(ck, batch.revive_qid):
                return False
            self.offsets.commit(req.group, topic, queue_id, result.next_begin_offset)
        batch.start_offset_info.append(receipt.start_offset_entry(topic, queue_id, offset))
        batch.msg_offset_info.append(receipt.msg_offset_entry(topic, queue_id, queue_offsets))
        batch.popped.append((topic, queue_id, len(result.messages), result.buffer_total_size))
        if is_retry and not self.config().pop_response_return_actual_retry_topic:
            for raw in result.messages:
                batch.messages.append(self._as_original(req, batch, offset, raw))
        else:
            batch.messages.extend(result.messages)
        return True

    def _as_original(self, req: PopRequest, batch: PopBatch, ck_offset: int, raw: bytes) -> bytes:
        """A retry-topic record re-encoded under the requested topic, its receipt in POP_CK."""
        rec = decode_record(raw)
        props = rec.properties()
        props.setdefault(PROPERTY_POP_CK, build_extra_info(
            ck_offset, batch.pop_time, req.invisible_time, batch.revive_qid, rec.topic,
            self.config().broker_name, rec.queue_id, rec.queue_offset))
        return encode_record(
            topic=req.topic, body=rec.body, properties=properties_to_string(props),
            queue_id=rec.queue_id, flag=rec.flag, queue_offset=rec.queue_offset,
            physical_offset=rec.physical_offset, sysflag=rec.sysflag,
            born_timestamp=rec.born_timestamp, born_host=rec.born_host,
            store_timestamp=rec.store_timestamp, store_host=rec.store_host,
            reconsume_times=rec.reconsume_times,
            prepared_transaction_offset=rec.prepared_transaction_offset)

    # ------------------------------------------------------------------ PEEK

    def peek(self, group: str, topic: str, queue_id: int, max_nums: int) -> tuple[list[bytes],
                                                                                   int]:
        """Messages a pop would get, without popping; and the rest count (5.3 PEEK)."""
        rand = self.random.randrange(100)
        messages: list[bytes] = []
        rest = 0
        retry = receipt.pop_retry_topic(topic, group, v2=self.config().enable_retry_topic_v2)
        need_retry = rand % 5 == 0
        if need_retry:
            rest = self._peek_topic(group, retry, rand, max_nums, messages, rest)
        if queue_id < 0:
            rest = self._peek_topic(group, topic, rand, max_nums, messages, rest)
        else:
            rest = self._peek_queue(group, topic, queue_id, max_nums, messages, rest)
        if not need_retry and len(messages) < max_nums:
            rest = self._peek_topic(group, retry, rand, max_nums, messages, rest)
        return messages, rest

    def _peek_topic(self, group: str, topic: str, rand: int, max_nums: int,
                    messages: list[bytes], rest: int) -> int:
        config = self.topics.get(topic)
        if config is None:
            return rest
        n = config.read_queue_nums
        for i in range(n):
            rest = self._peek_queue(group, topic, (rand + i) % n, max_nums, messages, rest)
        return rest

    def _peek_queue(self, group: str, topic: str, queue_id: int, max_nums: int,
                    messages: list[bytes], rest: int) -> int:
        store = self.store
        offset = self.peek_offset(group, topic, queue_id)
        rest += max(store.get_max_offset_in_queue(topic, queue_id) - offset, 0)
        if len(messages) >= max_nums:
            return rest
        result = store.get_message(group, topic, queue_id, offset, max_nums - len(messages))
        if result.status in (_S.OFFSET_TOO_SMALL, _S.OFFSET_OVERFLOW_BADLY):
            result = store.get_message(group, topic, queue_id, result.next_begin_offset,
                                       max_nums - len(messages))
        messages.extend(result.messages)
        return rest

    # ------------------------------------------------------------------ NOTIFICATION

    def has_message(self, group: str, topic: str, queue_id: int, order: bool,
                    attempt_id: str | None) -> bool:
        """Whether a pop of the group would find a message (5.3 NOTIFICATION)."""
        rand = self.random.randrange(100)
        cfg = self.config()
        retry_topics = [receipt.pop_retry_topic(topic, group, v2=cfg.enable_retry_topic_v2)]
        if cfg.enable_retry_topic_v2 and cfg.retrieve_message_from_pop_retry_topic_v1:
            retry_topics.append(receipt.pop_retry_topic(topic, group))
        need_retry = rand % 5 == 0
        if need_retry and any(self._topic_has(group, t, rand, order, attempt_id, topic)
                              for t in retry_topics):
            return True
        if queue_id < 0:
            found = self._topic_has(group, topic, rand, order, attempt_id, topic)
        else:
            found = self._queue_has(group, topic, queue_id, order, attempt_id, topic)
        if found or need_retry:
            return found
        return any(self._topic_has(group, t, rand, order, attempt_id, topic)
                   for t in retry_topics)

    def _topic_has(self, group: str, topic: str, rand: int, order: bool, attempt_id: str | None,
                   asked: str) -> bool:
        config = self.topics.get(topic)
        if config is None:
            return False
        n = config.read_queue_nums
        return any(self._queue_has(group, topic, (rand + i) % n, order, attempt_id, asked)
                   for i in range(n))

    def _queue_has(self, group: str, topic: str, queue_id: int, order: bool,
                   attempt_id: str | None, asked: str) -> bool:
        if order and self.order.check_block(attempt_id, asked, group, queue_id, 0):
            return False
        offset = self.peek_offset(group, topic, queue_id)
        return self.store.get_max_offset_in_queue(topic, queue_id) > offset

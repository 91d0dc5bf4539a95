"""`ReviveService`: puts popped messages nobody acked back, when their invisible time is over.

How this works (5.3 `PopReviveService.reviveRetry`): for each checkpoint of the book that fell
due, every message it covers that is not acked is read back from its queue and put into the
group's pop retry topic (`%RETRY%<group>_<topic>`, or `+` with enableRetryTopicV2; a message
popped from a retry topic goes back to that topic) with its reconsume times raised by one, its
properties kept and 1ST_POP_TIME set on its first return.  The retry topic is created on first
use as 5.3 creates it (one queue, perm 6, the group's offset on it at 0).  However often it was
consumed, a message goes back to the retry topic, never to `%DLQ%<group>`: as in 5.3.3, the
consumer that pops it past its count sends it there (the proxy's receive filter, our remoting
`PopConsumer`: CONSUMER_SEND_MSG_BACK with delay level -1).  A checkpoint of a topic or group
that no longer exists is dropped.  A put that
fails leaves the checkpoint pending and tries again later (5.3's re-put intervals).  After
each round the revive queues' offsets advance past what is done and, when something was
revived, the consumer offsets are written soon, which keeps the window in which a kill -9
could revive a message twice small.  Only a master revives.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from engine.broker.pop.book import CheckpointBook, Pending
from engine.broker.pop.broker import PopBroker
from engine.broker.pop.names import RETRY_QUEUE_NUM
from engine.common.service import Service
from engine.protocol import receipt
from engine.protocol.errors import ProtocolError
from engine.protocol.message import (
    PROPERTY_FIRST_POP_TIME,
    RETRY_GROUP_TOPIC_PREFIX,
    MessageRecord,
    decode_record,
    message_from_record,
    properties_to_string,
)
from engine.protocol.perm import PERM_RW
from engine.store.results import PutMessageResult

log = logging.getLogger(__name__)

#: 5.3 `ckRewriteIntervalsInSeconds`: how long a checkpoint whose put failed waits.
RETRY_INTERVALS_S = (10, 20, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800,
                     3600, 7200)
MIN_WAIT_S = 0.01


class ReviveService(Service):
    name = "pop-revive"

    def __init__(self, broker: PopBroker, book: CheckpointBook, ensure_loaded: Callable[[], bool],
                 commit_revive_offsets: Callable[[], bool]) -> None:
        super().__init__(broker.config.revive_interval / 1000)
        self.broker = broker
        self.book = book
        #: Whether this broker serves POP now (a master, its book replayed): `PopService`'s.
        self.ensure_loaded = ensure_loaded
        #: Moves the revive queues' offsets past what is done; True when one moved.
        self.commit_revive_offsets = commit_revive_offsets
        self._failures: dict[int, int] = {}  # id(Pending) -> failed attempts
        self._idle_rounds = 0
        #: Messages put back into retry topics since start.
        self.revived = 0

    async def run_once(self) -> None:
        self.revive_due()

    def revive_due(self) -> int:
        """One round: revive what is due, advance the revive offsets; returns messages put."""
        broker = self.broker
        interval_ms = broker.config.revive_interval
        if not self.ensure_loaded():
            self.interval = interval_ms / 1000
            return 0
        now = broker.clock()
        put = 0
        for entry in list(self.book.due(now)):
            put += self._revive(entry, now)
        if self.commit_revive_offsets() and put:
            broker.offsets.persist()
        self._schedule(now, interval_ms, busy=put > 0)
        return put

    def _schedule(self, now: int, interval_ms: int, *, busy: bool) -> None:
        """Sleep until the next checkpoint falls due, at most reviveInterval; with nothing
        pending at all, idle rounds stretch to reviveMaxSlow x reviveInterval."""
        next_due = self.book.next_due()
        if next_due is None:
            self._idle_rounds = 0 if busy else min(self._idle_rounds + 1,
                                                   self.broker.config.revive_max_slow)
            wait_ms = interval_ms * max(self._idle_rounds, 1)
        else:
            self._idle_rounds = 0
            wait_ms = min(max(next_due - self.broker.clock(), 0), interval_ms)
        self.interval = max(wait_ms / 1000, MIN_WAIT_S)

    def checkpoint_added(self, revive_time: int) -> None:
        """A pop wrote a checkpoint: wake up if it falls due before the planned round."""
        if revive_time - self.broker.clock() < self.interval * 1000:
            self.wakeup()

    # ------------------------------------------------------------------ one checkpoint

    def _revive(self, entry: Pending, now: int) -> int:
        broker, book, ck = self.broker, self.book, entry.ck
        normal = receipt.normal_topic(ck.topic, ck.cid)
        # 5.3 creates the group, with autoCreateSubscriptionGroup
        group = broker.groups.find_or_create(ck.cid)
        if broker.topics.get(normal) is None or group is None:
            log.warning("revive: %s or group %s no longer exists; checkpoint %s dropped",
                        normal, ck.cid, ck.unique_id())
            book.finish(entry)
            return 0
        put = 0
        for index in range(ck.num):
            if entry.done >> index & 1:
                continue
            offset = ck.ack_offset_by_index(index)
            record = self._read(ck.topic, ck.queue_id, offset)
            if record is not None:
                result = self._put_back(ck.topic, ck.cid, ck.pop_time, record)
                if not result.ok:
                    self._failed(entry, now, result)
                    return put
                put += 1
            book.mark_done(entry, index)
        self._failures.pop(id(entry), None)
        book.finish(entry)
        return put

    def _failed(self, entry: Pending, now: int, result: PutMessageResult) -> None:
        attempts = self._failures.get(id(entry), 0)
        self._failures[id(entry)] = attempts + 1
        wait = RETRY_INTERVALS_S[min(attempts, len(RETRY_INTERVALS_S) - 1)]
        log.error("revive of %s failed (%s %s); trying again in %d s", entry.ck.unique_id(),
                  result.status, result.error_message, wait)
        self.book.postpone(entry, now + wait * 1000)

    def _read(self, topic: str, queue_id: int, offset: int) -> MessageRecord | None:
        store = self.broker.store
        found = store.get_queue_entry(topic, queue_id, offset)
        data = store.look_message_by_offset(found[0], found[1]) if found else None
        if data is None:
            log.info("revive: %s queue %d offset %d is no longer stored; nothing to put back",
                     topic, queue_id, offset)
            return None
        try:
            return decode_record(data)
        except ProtocolError as exc:
            log.error("revive: %s queue %d offset %d does not decode (%s); skipped", topic,
                      queue_id, offset, exc)
            return None

    def _put_back(self, topic: str, group: str, pop_time: int,
                  record: MessageRecord) -> PutMessageResult:
        """The message into the group's pop retry topic, whatever its reconsume times."""
        broker = self.broker
        # A delay level stays (a message delivered from one keeps DELAY): as 5.3.3's
        # reviveRetry, the put parks it for its level again, into the retry topic.
        props = record.properties()
        if record.reconsume_times == 0 or PROPERTY_FIRST_POP_TIME not in props:
            props[PROPERTY_FIRST_POP_TIME] = str(pop_time)
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            target = topic
        else:
            target = receipt.pop_retry_topic(topic, group, v2=broker.config.enable_retry_topic_v2)
        if broker.topics.get(target) is None:
            broker.topics.create_if_absent(target, RETRY_QUEUE_NUM, PERM_RW)
            if broker.offsets.query(group, target, 0) < 0:
                broker.offsets.commit(group, target, 0, 0)
        host = broker.store_host
        msg = message_from_record(
            record, topic=target, queue_id=0, properties=properties_to_string(props),
            reconsume_times=record.reconsume_times + 1, born_host=host, store_host=host,
            prepared_transaction_offset=0)
        result = broker.store.append_message(msg)
        if result.ok:
            broker.stats.on_put(target, 1, len(msg.body))
            self.revived += 1
        return result

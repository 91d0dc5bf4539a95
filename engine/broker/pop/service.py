"""`PopService`: the POP parts of one broker wired together, and how they are rebuilt after a
restart.

How this works (docs/pop.md): a POP commits the group's consumer offset past what it handed out
and writes a checkpoint to the revive topic; an ACK writes an ack there.  Both are entered in
the in-memory `CheckpointBook` as they are written.  The revive queues' progress is the revive
group's consumer offset (`CID_RMQ_SYS_REVIVE_GROUP` on `rmq_sys_REVIVE_LOG_<cluster>`), kept
just before the oldest checkpoint not yet done.  On a master that starts (or a slave that
becomes master) `ensure_loaded` replays every revive queue from that offset: the checkpoints
not done come back into the book with their acks, and each group's consumer offset is raised
past every message a replayed checkpoint covers, in case the offsets file was older than the
checkpoints (kill -9 between two offset flushes): nothing popped is popped again, everything
unacked is revived.  A slave keeps no book; it replicates the revive topic and the offsets.

The service reads its broker through `PopBroker` and hands each part only what it uses: the
popper and the acker get a few tables and callables, the revive service the broker (it puts
messages, creates retry topics and counts them) with the book and two callables of this
service.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from engine.broker.pop.acker import Acker
from engine.broker.pop.book import CheckpointBook
from engine.broker.pop.broker import PopBroker
from engine.broker.pop.names import REVIVE_GROUP, revive_topic
from engine.broker.pop.order import ConsumerOrderInfoManager
from engine.broker.pop.polling import PopPolling
from engine.broker.pop.popper import Popper
from engine.broker.pop.records import PopCheckPoint
from engine.broker.pop.revive import ReviveService
from engine.broker.pop.revive_log import ReviveLog
from engine.store.config import FlushDiskType

log = logging.getLogger(__name__)


class PopService:
    def __init__(self, broker: PopBroker) -> None:
        self.broker = broker
        cfg = broker.config
        self.revive_topic = revive_topic(cfg.broker_cluster_name)
        self.book = CheckpointBook()
        self.log = ReviveLog(broker.store, self.revive_topic, cfg.revive_queue_num, self.book,
                             cfg.broker_name, lambda: broker.store_host, broker.clock,
                             on_checkpoint=lambda ck: self.revive.checkpoint_added(ck.revive_time))
        self.order = ConsumerOrderInfoManager(broker.store_config.config_dir, broker.clock)
        self.order.exists = self._queue_exists
        self.polling = PopPolling(broker.store, lambda: broker.config)
        self.popper = Popper(broker.store, broker.offsets, broker.topics, lambda: broker.config,
                             broker.clock, self.log, self.order, self.inflight)
        self.acker = Acker(broker.offsets, broker.clock, self.log, self.order,
                           self.polling.notify_key)
        self.revive = ReviveService(broker, self.book, self.ensure_loaded,
                                    self.commit_revive_offsets)
        self.loaded = False

    def _queue_exists(self, topic: str, group: str, queue_id: int) -> bool:
        config = self.broker.topics.get(topic)
        return (config is not None and queue_id < config.read_queue_nums
                and self.broker.groups.get(group) is not None)

    def flushed_since(self, mark: int) -> Awaitable[object] | None:
        """Under SYNC_FLUSH, what to await before answering a request that wrote revive
        records since `mark` (`log.appended` when it started): their bytes on disk."""
        last = self.log.last
        if (mark == self.log.appended or last is None
                or self.broker.store_config.flush_disk_type is not FlushDiskType.SYNC_FLUSH):
            return None
        return self.broker.store.flushed(last)

    # ------------------------------------------------------------------ recovery

    def ensure_loaded(self) -> bool:
        """Rebuild the book on a master that has none; drop it on a slave.  Returns whether
        this broker serves POP now (it is the master)."""
        if self.broker.is_slave:
            if self.loaded:  # demoted: forget the book, answer the held pops (they see it)
                self.book.clear()
                self.loaded = False
                self.polling.wake_all(close=False)
            return False
        if not self.loaded:
            self._replay()
            self.loaded = True
        return True

    def _replay(self) -> None:
        offsets, revive_log = self.broker.offsets, self.log
        self.book.clear()
        raised: dict[tuple[str, str, int], int] = {}
        total_cks = total_acks = 0
        stored = self.broker.store.topic_queues().get(self.revive_topic, [])
        revive_log.revive_qids = sorted(set(range(revive_log.revive_queue_num)) | set(stored))
        for qid in revive_log.revive_qids:
            start = offsets.query(REVIVE_GROUP, self.revive_topic, qid) + 1
            replayed = revive_log.replay(qid, max(start, 0))
            total_cks += len(replayed.checkpoints)
            total_acks += replayed.acks
            for ck in replayed.checkpoints:
                self._raise_pop_offset(ck, raised)
        self.commit_revive_offsets()
        if total_cks or total_acks:
            log.info("POP: replayed %d checkpoints and %d acks from %s; %d checkpoints pending, "
                     "consumer offsets raised for %d queues", total_cks, total_acks,
                     self.revive_topic, len(self.book), len(raised))

    def _raise_pop_offset(self, ck: PopCheckPoint, raised: dict[tuple[str, str, int], int]
                          ) -> None:
        if ck.num <= 0:
            return
        after = max(ck.offsets()) + 1
        offsets = self.broker.offsets
        if offsets.query(ck.cid, ck.topic, ck.queue_id) < after:
            offsets.commit(ck.cid, ck.topic, ck.queue_id, after)
            raised[(ck.cid, ck.topic, ck.queue_id)] = after

    # ------------------------------------------------------------------ progress

    def commit_revive_offsets(self) -> bool:
        """Move each revive queue's consumer offset up to just before its oldest pending
        checkpoint (its last record when none is pending); True when one moved."""
        offsets, store, topic = self.broker.offsets, self.broker.store, self.revive_topic
        moved = False
        for qid in self.log.revive_qids:
            oldest = self.book.oldest_offset(qid)
            done = (oldest if oldest is not None
                    else store.get_max_offset_in_queue(topic, qid)) - 1
            if done > offsets.query(REVIVE_GROUP, topic, qid):
                offsets.commit(REVIVE_GROUP, topic, qid, done)
                moved = True
        return moved

    # ------------------------------------------------------------------ figures

    def inflight(self, topic: str, group: str, queue_id: int) -> int:
        """Messages popped from a queue and neither acked nor revived yet (FIFO included)."""
        return (self.book.inflight(topic, group, queue_id)
                + self.order.inflight(topic, group, queue_id))

    def progress(self, topic: str, group: str, queue_id: int, committed: int) -> tuple[int, int]:
        """(consumer offset, pull offset) of a queue as 5.3's `ConsumerLagCalculator` counts a
        POP group: the pull offset is how far pops have read, the consumer offset that minus
        what is in flight, so lag (max - consumer) is ready + in flight and in flight is pull -
        consumer.  A queue nobody pops from has both at `committed`."""
        if committed < 0:
            return committed, committed
        fifo = self.order.get(topic, group, queue_id)
        if fifo is not None and fifo.offset_list and fifo.inflight(self.broker.clock()):
            return committed, max(committed, max(fifo.queue_offsets()) + 1)
        return max(committed - self.book.inflight(topic, group, queue_id), 0), committed

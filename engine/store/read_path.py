"""The pull read path: consume-queue entries -> records, with RocketMQ's statuses and limits."""

from __future__ import annotations

from engine.store.commit_log import CommitLog
from engine.store.config import MessageStoreConfig
from engine.store.consume_queue import CQ_ENTRY, CQ_STORE_UNIT_SIZE
from engine.store.consume_queue_table import ConsumeQueueTable
from engine.store.message_filter import MessageFilter
from engine.store.results import GetMessageResult, GetMessageStatus


class MessageReader:
    """DefaultMessageStore.getMessage: scans a queue, filters, copies records into bytes."""

    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        total_physical_memory: int,
    ) -> None:
        self.config = config
        self.commit_log = commit_log
        self.queues = queues
        self.total_physical_memory = total_physical_memory

    def in_disk(self, max_phy: int, offset_py: int) -> bool:
        memory = self.total_physical_memory * self.config.access_message_in_memory_max_ratio / 100
        return max_phy - offset_py > memory

    def batch_full(self, size: int, max_nums: int, total: int, count: int, in_disk: bool) -> bool:
        if total == 0 or count == 0:
            return False
        if max_nums <= count:
            return True
        cfg = self.config
        if in_disk:
            return (
                total + size > cfg.max_transfer_bytes_on_message_in_disk
                or count > cfg.max_transfer_count_on_message_in_disk - 1
            )
        return (
            total + size > cfg.max_transfer_bytes_on_message_in_memory
            or count > cfg.max_transfer_count_on_message_in_memory - 1
        )

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
    ) -> GetMessageResult:
        """Up to `max_msg_nums` records of a queue from logical `offset` (PULL_MESSAGE)."""
        cq = self.queues.find(topic, queue_id)
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_off, max_off = cq.min_offset, cq.max_offset
        S = GetMessageStatus
        if max_off == 0:
            return GetMessageResult(S.NO_MESSAGE_IN_QUEUE, 0, min_off, max_off)
        if offset < min_off:
            return GetMessageResult(S.OFFSET_TOO_SMALL, min_off, min_off, max_off)
        if offset == max_off:
            return GetMessageResult(S.OFFSET_OVERFLOW_ONE, offset, min_off, max_off)
        if offset > max_off:
            nxt = min_off if min_off == 0 else max_off
            return GetMessageResult(S.OFFSET_OVERFLOW_BADLY, nxt, min_off, max_off)
        entries = cq.read_entries(offset, max(16000, max_msg_nums * CQ_STORE_UNIT_SIZE))
        if not entries:
            return GetMessageResult(
                S.OFFSET_FOUND_NULL, cq.roll_next_file(offset), min_off, max_off
            )
        result = GetMessageResult(S.NO_MATCHED_MESSAGE, offset, min_off, max_off)
        max_phy = self.commit_log.max_offset
        mfq = self.commit_log.mfq
        messages = result.messages
        queue_offsets = result.queue_offsets
        total = 0
        next_phy_file_start = -1
        max_phy_pulling = 0
        mf = None
        i = 0
        for offset_py, size_py, tags_code in CQ_ENTRY.iter_unpack(entries):
            max_phy_pulling = offset_py
            if next_phy_file_start >= 0 and offset_py < next_phy_file_start:
                i += 1
                continue
            if self.batch_full(
                size_py, max_msg_nums, total, len(messages), self.in_disk(max_phy, offset_py)
            ):
                break
            if message_filter is not None and not message_filter.is_matched_by_consume_queue(
                tags_code
            ):
                i += 1
                continue
            if mf is None or not (mf.file_from_offset <= offset_py < mf.file_end_offset):
                mf = mfq.find(offset_py)
            data = mf.read(offset_py - mf.file_from_offset, size_py) if mf is not None else b""
            if len(data) != size_py or size_py <= 0:
                if total == 0:
                    result.status = S.MESSAGE_WAS_REMOVING
                next_phy_file_start = self.commit_log.roll_next_file(offset_py)
                i += 1
                continue
            if message_filter is not None and not message_filter.is_matched_by_commit_log(data):
                i += 1
                continue
            messages.append(data)
            queue_offsets.append(offset + i)
            total += size_py
            result.status = S.FOUND
            next_phy_file_start = -1
            i += 1
        result.buffer_total_size = total
        result.next_begin_offset = offset + i
        result.suggest_pulling_from_slave = self.in_disk(max_phy, max_phy_pulling)
        return result

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, offset: int) -> bool:
        """Whether the message at a logical offset lies beyond the in-memory window."""
        cq = self.queues.find(topic, queue_id)
        entry = cq.get_entry(offset) if cq else None
        if entry is None:
            return False
        return self.in_disk(self.commit_log.max_offset, entry[0])

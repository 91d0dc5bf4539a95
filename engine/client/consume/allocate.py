"""Queue allocation strategies for clustering consumers (client-behaviour.md §5).

How this works: every consumer of a group sees the same sorted queue list `mq_all` and the
same sorted client-id list `cid_all`, and computes its own share; the shares of all
consumers cover every queue exactly once.  A client id missing from `cid_all` (it has not
heart-beaten to the broker asked yet) gets nothing.

    averagely (n = 8 queues, m = 3 consumers):   c0 q0 q1 q2 | c1 q3 q4 q5 | c2 q6 q7
    by circle:                                    c0 q0 q3 q6 | c1 q1 q4 q7 | c2 q2 q5
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from engine.protocol.body.message_queue import MessageQueue


class AllocateStrategy(Protocol):
    name: str

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        """This consumer's queues."""


def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    return current_cid in cid_all


class AllocateMessageQueueAveragely:
    """Contiguous blocks; the first `n % m` consumers get one queue more."""

    name = "AVG"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        n, m = len(mq_all), len(cid_all)
        i = list(cid_all).index(current_cid)
        mod = n % m
        extra = mod > 0 and i < mod  # one of the first n % m consumers
        avg = 1 if n <= m else n // m + (1 if extra else 0)
        start = i * avg if extra else i * avg + mod
        count = min(avg, n - start)
        return [mq_all[(start + k) % n] for k in range(count)]


class AllocateMessageQueueAveragelyByCircle:
    """Round robin: queue j goes to consumer j % m."""

    name = "AVG_BY_CIRCLE"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        m = len(cid_all)
        i = list(cid_all).index(current_cid)
        return [mq for j, mq in enumerate(mq_all) if j % m == i]

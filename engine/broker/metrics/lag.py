"""Consumer lag by group and topic, as 5.3's `ConsumerLagCalculator` reports it for remoting.

How this works: for every (group, topic) of the consumer offset table and every queue the group
has committed, lag is the queue's max offset minus the committed offset; the lag latency is
now minus the store time of the oldest unconsumed message (the one at the committed offset).
5.3 also tracks a pull offset per queue, which splits the lag into in-flight (pulled, not
committed) and ready (not pulled) messages; this broker does not keep pull offsets, so it
reports every lagging message as ready, none in flight, and the queueing latency equals the
lag latency.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.broker.state import BrokerState
from engine.broker.topics import RETRY_PREFIX


@dataclass(frozen=True, slots=True)
class GroupLag:
    group: str
    topic: str
    is_retry: bool
    lag: int  # messages
    earliest_unconsumed_ms: int  # store time of the oldest unconsumed message, 0 if none


#: (topic, queue id, offset) -> store time of the message there (<= 0: none)
StampOf = Callable[[str, int, int], int]


def group_lags(st: BrokerState, stamp_of: StampOf | None = None) -> list[GroupLag]:
    """The lag of every (group, topic) with committed offsets on this broker.

    `stamp_of` reads a message's store time (default: from the store each time).
    """
    store = st.store
    if stamp_of is None:
        stamp_of = store.get_message_store_timestamp
    out = []
    for topic, group, queues in st.offsets.entries():
        lag = 0
        earliest = 0
        for queue_id, committed in queues.items():
            if committed < 0:
                continue
            behind = store.get_max_offset_in_queue(topic, queue_id) - committed
            if behind <= 0:
                continue
            lag += behind
            stamp = stamp_of(topic, queue_id, committed)
            if stamp > 0 and (earliest == 0 or stamp < earliest):
                earliest = stamp
        out.append(GroupLag(group, topic, topic.startswith(RETRY_PREFIX), lag, earliest))
    return out

"""Consumer lag by group and topic, as 5.3's `ConsumerLagCalculator` reports it for remoting.

How this works: for every (group, topic) of the consumer offset table and every queue the group
has committed, lag is the queue's max offset minus the committed offset; the lag latency is
now minus the store time of the oldest unconsumed message (the one at the committed offset).
5.3 also tracks a pull offset per queue, which splits the lag into in-flight (pulled, not
committed) and ready (not pulled) messages; this broker keeps none for pulling consumers, so
it reports their every lagging message as ready, none in flight, and the queueing latency
equals the lag latency.  A POP group is counted as 5.3 counts one: its committed offset is how
far pops have read, its in-flight messages (popped, not acked, not revived) are added to the
lag, and the lag latency is that of the oldest of them (`PopService.progress`).
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
    inflight: int = 0  # POP: popped, not acked yet (part of `lag`)

    @property
    def ready(self) -> int:
        """Lagging messages not handed out yet."""
        return self.lag - self.inflight


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
    progress = st.pop.progress
    for topic, group, queues in st.offsets.entries():
        lag = inflight = 0
        earliest = 0
        for queue_id, committed in queues.items():
            if committed < 0:
                continue
            consumed, pulled = progress(topic, group, queue_id, committed)
            behind = store.get_max_offset_in_queue(topic, queue_id) - consumed
            if behind <= 0:
                continue
            lag += behind
            inflight += pulled - consumed
            stamp = stamp_of(topic, queue_id, consumed)
            if stamp > 0 and (earliest == 0 or stamp < earliest):
                earliest = stamp
        out.append(GroupLag(group, topic, topic.startswith(RETRY_PREFIX), lag, earliest,
                            inflight))
    return out

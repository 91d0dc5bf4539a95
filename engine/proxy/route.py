"""QueryRoute / QueryAssignment answers and queue selection, from remoting routes (sans-IO).

How this works (5.3 `RouteActivity`, `SendMessageActivity.SendMessageQueueSelector`): a
topic's queue data becomes 5.x message queues whose broker endpoints are the proxy's own
address (the client reaches every broker through the proxy): per broker, read-only queues
first, then write-only, then read-write, numbered from 0, each accepting the topic's message
types.  A send with a message group goes to the write queue Guava's `consistentHash` of the
group's Java `hashCode` picks, so a group maps to the queue 5.3's proxy would choose;
without one, the write queues take turns.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.protocol.attributes import TopicMessageType
from engine.protocol.body.route import MASTER_ID, TopicRouteData
from engine.protocol.perm import is_readable, is_writeable
from engine.proxy.v2 import definition_pb2 as pb

_T = TopicMessageType
_ACCEPTS = {_T.NORMAL: [pb.NORMAL], _T.FIFO: [pb.FIFO], _T.DELAY: [pb.DELAY],
            _T.TRANSACTION: [pb.TRANSACTION],
            _T.MIXED: [pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION]}


@dataclass(frozen=True, slots=True)
class WriteQueue:
    broker_name: str
    broker_addr: str
    queue_id: int
    #: The broker's write queue count (the send header's defaultTopicQueueNums).
    queue_nums: int


def accepted_types(topic_type: TopicMessageType) -> list[int]:
    return list(_ACCEPTS.get(topic_type, [pb.MESSAGE_TYPE_UNSPECIFIED]))


def _permission(perm: int) -> int:
    readable, writeable = is_readable(perm), is_writeable(perm)
    if readable and writeable:
        return pb.READ_WRITE
    if readable:
        return pb.READ
    if writeable:
        return pb.WRITE
    return pb.NONE


def message_queues(topic: str, route: TopicRouteData, endpoints: pb.Endpoints,
                   topic_type: TopicMessageType) -> list[pb.MessageQueue]:
    """5.3 `genMessageQueueFromQueueData` for every broker of the route with a master."""
    accepts = accepted_types(topic_type)
    masters = {d.broker_name for d in route.broker_datas if MASTER_ID in d.broker_addrs}
    out: list[pb.MessageQueue] = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if qd.broker_name not in masters:
            continue
        broker = pb.Broker(name=qd.broker_name, id=MASTER_ID, endpoints=endpoints)
        readable, writeable = is_readable(qd.perm), is_writeable(qd.perm)
        r = w = rw = 0
        if readable and writeable:
            rw = min(qd.read_queue_nums, qd.write_queue_nums)
            r, w = qd.read_queue_nums - rw, qd.write_queue_nums - rw
        elif writeable:
            w = qd.write_queue_nums
        elif readable:
            r = qd.read_queue_nums
        queue_id = 0
        for count, perm in ((r, pb.READ), (w, pb.WRITE), (rw, pb.READ_WRITE)):
            for _ in range(count):
                out.append(pb.MessageQueue(topic=pb.Resource(name=topic), id=queue_id,
                                           permission=perm, broker=broker,
                                           accept_message_types=accepts))  # type: ignore[arg-type]
                queue_id += 1
        if not (r or w or rw):
            out.append(pb.MessageQueue(topic=pb.Resource(name=topic), id=0,
                                       permission=pb.NONE, broker=broker,
                                       accept_message_types=accepts))  # type: ignore[arg-type]
    return out


def assignments(topic: str, route: TopicRouteData, endpoints: pb.Endpoints,
                *, fifo: bool = False) -> list[pb.Assignment]:
    """5.3 `queryAssignment`: one queue per readable broker (id -1), or each queue when FIFO."""
    masters = {d.broker_name for d in route.broker_datas if MASTER_ID in d.broker_addrs}
    out: list[pb.Assignment] = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if qd.broker_name not in masters or not is_readable(qd.perm) or qd.read_queue_nums <= 0:
            continue
        broker = pb.Broker(name=qd.broker_name, id=MASTER_ID, endpoints=endpoints)
        ids = range(qd.read_queue_nums) if fifo else [-1]
        for queue_id in ids:
            out.append(pb.Assignment(message_queue=pb.MessageQueue(
                topic=pb.Resource(name=topic), id=queue_id,
                permission=_permission(qd.perm), broker=broker)))  # type: ignore[arg-type]
    return out


def write_queues(route: TopicRouteData) -> list[WriteQueue]:
    """The topic's writable queues on brokers with a master, by broker name then queue id."""
    masters = {d.broker_name: d.broker_addrs[MASTER_ID] for d in route.broker_datas
               if MASTER_ID in d.broker_addrs}
    out: list[WriteQueue] = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        addr = masters.get(qd.broker_name)
        if addr is None or not is_writeable(qd.perm):
            continue
        out.extend(WriteQueue(qd.broker_name, addr, i, qd.write_queue_nums)
                   for i in range(qd.write_queue_nums))
    return out


# ---------------------------------------------------------------------- queue selection

_MASK64 = (1 << 64) - 1


def java_string_hash(text: str) -> int:
    """Java `String.hashCode` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def consistent_hash(value: int, buckets: int) -> int:
    """Guava `Hashing.consistentHash(long, int)` (its linear congruential walk)."""
    if buckets <= 0:
        raise ValueError("buckets must be positive")
    state = value & _MASK64
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & _MASK64
        next_double = ((state >> 33) + 1) / float(1 << 31)
        nxt = int((candidate + 1) / next_double)
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def queue_for_group(queues: list[WriteQueue], message_group: str) -> WriteQueue:
    return queues[consistent_hash(java_string_hash(message_group), len(queues))]

"""Sending messages as a producer does: pick a writable queue of the topic's route, send.

How this works: `Producer` reads the topic's route once, lists the writable queues of the
brokers that have a master online (sorted, as Java's `TopicPublishInfo`), and sends to them
round robin, or to the broker and queue asked for.  Used by sendMessage, checkMsgSendRT,
the resend of queryMsgById and the dev cluster's demo traffic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engine.client.admin import MQAdmin
from engine.client.errors import TopicNotExistError
from engine.protocol.perm import is_writeable
from mqadmin.exit_codes import TargetNotFound
from mqadmin.operations.messaging import PRODUCER_GROUP, SendResult, send


@dataclass(frozen=True, slots=True)
class Queue:
    broker_name: str
    queue_id: int
    addr: str


class Producer:
    """``await Producer.of(admin, topic)``, then ``await producer.send(body, ...)``."""

    def __init__(self, admin: MQAdmin, topic: str, queues: list[Queue], *,
                 group: str = PRODUCER_GROUP) -> None:
        self.admin = admin
        self.topic = topic
        self.queues = queues
        self.group = group
        self._next = 0

    @classmethod
    async def of(cls, admin: MQAdmin, topic: str, *, group: str = PRODUCER_GROUP) -> Producer:
        """A producer of `topic`.

        Raises:
            TopicNotExistError: no route for the topic.
            TargetNotFound: the route has no writable queue on a master.
        """
        route = await admin.namesrv.topic_route(topic)
        masters = {d.broker_name: d.master_addr() for d in route.broker_datas}
        queues = [Queue(q.broker_name, i, addr)
                  for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
                  if is_writeable(q.perm) and (addr := masters.get(q.broker_name)) is not None
                  for i in range(q.write_queue_nums)]
        if not queues:
            raise TargetNotFound(f"topic '{topic}' has no writable queue on a master broker "
                                 "(see `mqadmin topicRoute -t " f"{topic}`).")
        return cls(admin, topic, queues, group=group)

    def pick(self, broker_name: str | None = None, queue_id: int | None = None) -> Queue:
        """The next queue round robin, or the one asked for.

        Raises:
            TargetNotFound: the broker or queue is not a writable queue of the topic.
        """
        if broker_name is not None:
            found = [q for q in self.queues if q.broker_name == broker_name
                     and (queue_id is None or q.queue_id == queue_id)]
            if not found:
                raise TargetNotFound(
                    f"broker '{broker_name}'" + (f" queue {queue_id}" if queue_id is not None
                                                 else "")
                    + f" is not a writable queue of topic '{self.topic}' (see `mqadmin "
                    f"topicRoute -t {self.topic}`).")
            if queue_id is not None:
                return found[0]
            candidates = found
        else:
            candidates = self.queues
        queue = candidates[self._next % len(candidates)]
        self._next += 1
        return queue

    async def send(self, body: bytes, *, tags: str | None = None, keys: str | None = None,
                   broker_name: str | None = None, queue_id: int | None = None,
                   properties: Mapping[str, str] | None = None) -> SendResult:
        """Send one message (see `messaging.send` for the errors)."""
        queue = self.pick(broker_name, queue_id)
        return await send(self.admin.client, queue.addr, queue.broker_name, self.topic, body,
                          queue_id=queue.queue_id, tags=tags, keys=keys,
                          properties=dict(properties or {}), group=self.group)


async def producer_or_not_found(admin: MQAdmin, topic: str) -> Producer:
    """`Producer.of` with a message saying how to create the topic.

    Raises:
        TopicNotExistError: no route (its message names updateTopic).
    """
    try:
        return await Producer.of(admin, topic)
    except TopicNotExistError as exc:
        raise TopicNotExistError(exc.code, f"topic '{topic}' does not exist; create it with "
                                 "`mqadmin updateTopic`", exc.addr) from None

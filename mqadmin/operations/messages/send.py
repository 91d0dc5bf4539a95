"""Sending test messages: sendMessage (a change for the change runner) and checkMsgSendRT,
through operations.sending's producer.

How this works: sendMessage plans by checking the topic (and the broker or queue named) on
the name servers' route and shows the message it will send; applied, it sends it and reads
it back at the offset message id the broker answered with (`stored_as_sent`): that read is
the verification, and the change runner audits how it ended.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from engine.client.admin import MQAdmin
from engine.client.errors import ClientError
from engine.client.message import Message
from engine.protocol.perm import is_writeable
from mqadmin.config import Endpoint
from mqadmin.exit_codes import NotVerified, TargetNotFound, UsageProblem
from mqadmin.operations import change
from mqadmin.operations.mutation import Progress
from mqadmin.operations.sending import producer, require_topic, send_row, stored_as_sent

Row = dict[str, Any]

SEND_COLUMNS = ("brokerName", "queueId", "sendResult", "msgId", "offsetMsgId", "queueOffset")
RT_COLUMNS = ("brokerName", "queueId", "sendResult", "rtMs")
#: sendMessage's plan, and its outcome: where the message went and whether it was read back.
SEND_PLAN_COLUMNS = ("topic", "brokerName", "queueId", "tags", "keys", "bodyBytes")
SENT_COLUMNS = (*SEND_COLUMNS, "verified")


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message to send, and where (a broker, or a queue of it, when named)."""

    topic: str
    body: bytes
    keys: str | None = None
    tags: str | None = None
    broker_name: str | None = None
    queue_id: int | None = None

    def row(self) -> Row:
        return {"topic": self.topic, "brokerName": self.broker_name or "any",
                "queueId": "any" if self.queue_id is None else self.queue_id,
                "tags": self.tags, "keys": self.keys, "bodyBytes": len(self.body)}


def _not_writable(out: Outgoing) -> TargetNotFound:
    where = f"broker '{out.broker_name}'" + (f" queue {out.queue_id}"
                                             if out.queue_id is not None else "")
    return TargetNotFound(f"{where} is not a writable queue of topic '{out.topic}' (see "
                          f"`mqadmin topicRoute -t {out.topic}`).")


class SendChange:
    """sendMessage: one message sent to a topic, read back where it was stored."""

    def __init__(self, out: Outgoing, args: dict[str, Any]) -> None:
        self.out = out
        self.args = args

    async def plan(self, admin: MQAdmin, where: Endpoint,
                   progress: change.Progress) -> change.Planned[Outgoing]:
        """Raises: UsageProblem (-i without -b), TargetNotFound (no such topic, or the
        broker or queue named is not a writable one of it), as `require_topic`."""
        out = self.out
        if out.queue_id is not None and out.broker_name is None:
            raise UsageProblem("-i needs -b: name the broker of the queue.")
        await require_topic(admin, out.topic)
        if out.broker_name is not None:
            route = await admin.namesrv.topic_route(out.topic)
            if not any(q.broker_name == out.broker_name and is_writeable(q.perm)
                       and (out.queue_id is None or 0 <= out.queue_id < q.write_queue_nums)
                       for q in route.queue_datas):
                raise _not_writable(out)
        return change.Planned(out, "sendMessage", out.topic, self.args, [out.row()],
                              SEND_PLAN_COLUMNS, noun="topic", counted="")

    async def apply(self, admin: MQAdmin, where: Endpoint, planned: change.Planned[Outgoing],
                    progress: change.Progress) -> change.Outcome:
        out = planned.plan
        msg = Message(out.topic, out.body, tags=out.tags, keys=out.keys)
        async with producer(admin) as p:
            if out.broker_name is None:
                sent = await p.send(msg)
            else:
                queues = [q for q in await p.fetch_publish_queues(out.topic)
                          if q.broker_name == out.broker_name
                          and out.queue_id in (None, q.queue_id)]
                if not queues:
                    raise _not_writable(out)
                sent = await p.send_to_queue(msg, queues[0])
        verified = await stored_as_sent(admin, sent, out.topic)
        rows = [{**send_row(sent), "verified": verified}]
        if verified:
            return change.Outcome(rows, SENT_COLUMNS)
        return change.Outcome(rows, SENT_COLUMNS, "unverified", NotVerified(
            f"the message {sent.msg_id} was acknowledged ({sent.status.name}) but is not "
            f"readable in {out.topic} at {sent.offset_msg_id}; look for it with `mqadmin "
            f"queryMsgById -i {sent.msg_id} -t {out.topic}`."))


async def check_send_rt(admin: MQAdmin, topic: str, *, amount: int = 100, size: int = 128,
                        on_progress: Progress | None = None) -> tuple[list[Row], float]:
    """Send `amount` messages of `size` bytes round robin over the topic's writable queues
    and time each; the average leaves the first out, as Apache's checkMsgSendRT does."""
    await require_topic(admin, topic)
    body = b"a" * size
    rows: list[Row] = []
    async with producer(admin) as p:
        queues = await p.fetch_publish_queues(topic)
        for i in range(amount):
            mq = queues[i % len(queues)]
            started = time.perf_counter()
            try:
                sent = await p.send_to_queue(Message(topic, body), mq)
                rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id,
                             "sendResult": sent.status.name,
                             "rtMs": round((time.perf_counter() - started) * 1000, 3)})
            except ClientError as exc:
                rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id,
                             "sendResult": f"FAILED: {exc}", "rtMs": None})
            if on_progress is not None:
                on_progress(i + 1, amount)
    timed = [r["rtMs"] for r in rows[1:] if r["rtMs"] is not None]
    return rows, (sum(timed) / len(timed) if timed else 0.0)

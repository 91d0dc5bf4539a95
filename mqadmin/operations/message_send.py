"""Sending test messages: sendMessage and checkMsgSendRT (through operations.sending's producer)."""

from __future__ import annotations

import time
from typing import Any

from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import ClientError
from engine.client.core.message import Message
from mqadmin.exit_codes import TargetNotFound, UsageProblem
from mqadmin.operations.mutation import Progress
from mqadmin.operations.sending import producer, require_topic, send_row

Row = dict[str, Any]

SEND_COLUMNS = ("brokerName", "queueId", "sendResult", "msgId", "offsetMsgId", "queueOffset")
RT_COLUMNS = ("brokerName", "queueId", "sendResult", "rtMs")


async def send_message(admin: MQAdmin, topic: str, body: bytes, *, keys: str | None = None,
                       tags: str | None = None, broker_name: str | None = None,
                       queue_id: int | None = None) -> Row:
    """Send one message (to a broker, or a queue of it, when named)."""
    if queue_id is not None and broker_name is None:
        raise UsageProblem("-i needs -b: name the broker of the queue.")
    await require_topic(admin, topic)
    msg = Message(topic, body, tags=tags, keys=keys)
    async with producer(admin) as p:
        if broker_name is None:
            return send_row(await p.send(msg))
        queues = [q for q in await p.fetch_publish_queues(topic)
                  if q.broker_name == broker_name and queue_id in (None, q.queue_id)]
        if not queues:
            where = f"broker '{broker_name}'" + (f" queue {queue_id}" if queue_id is not None
                                                 else "")
            raise TargetNotFound(f"{where} is not a writable queue of topic '{topic}' (see "
                                 f"`mqadmin topicRoute -t {topic}`).")
        return send_row(await p.send_to_queue(msg, queues[0]))


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

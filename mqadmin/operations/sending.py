"""mqadmin's one producer: `engine.client.Producer` over the cluster an `MQAdmin` talks to.

How this works: sendMessage, checkMsgSendRT, queryMsgById's resend and the dead-letter
commands all send through `engine.client`'s producer, which refreshes routes, picks queues
and retries on another broker as Java's does (`retries` extra attempts; the dead-letter
resend asks for none, because its ledger retries after checking the target instead).  A
change that sends proves it with `stored_as_sent`: the message read back where the answer
says it was stored.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from engine.client.admin import MQAdmin
from engine.client.broker_admin import split_offset_msg_id
from engine.client.client_config import ClientConfig
from engine.client.errors import ClientError, TopicNotExistError
from engine.client.producer import Producer, ProducerOptions
from engine.client.results import SendResult
from engine.protocol.perm import is_writeable
from mqadmin.exit_codes import TargetNotFound
from mqadmin.operations.targets import unwritable

PRODUCER_GROUP = "MQADMIN_PRODUCER"
#: Properties brokers and clients set themselves (`MessageConst.STRING_HASH_SET` of 4.9.7
#: and 5.x, and the other internal names); a copy of a message leaves them out, and
#: everything else is a user property.
SYSTEM_PROPERTIES = frozenset({
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC",
    "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID",
    "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME",
    "UNIQ_KEY", "EXTEND_UNIQ_INFO", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "INNER_NUM",
    "INNER_BASE", "DUP_INFO", "CHECK_IMMUNITY_TIME_IN_SECONDS", "TRAN_PREPARED_QUEUE_OFFSET",
    "__transactionId__", "TRANSACTION_CHECK_TIMES", "INSTANCE_ID", "CORRELATION_ID",
    "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE",
    "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME", "PROPERTY_FORWARD_QUEUE_ID", "REDIRECT",
    "INNER_MULTI_DISPATCH", "INNER_MULTI_QUEUE_OFFSET", "TRACE_CONTEXT", "TIMER_DELAY_SEC",
    "TIMER_DELIVER_MS", "__BORNHOST", "BORN_TIMESTAMP", "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY",
    "TIMER_DELAY_LEVEL",
})
SEND_TIMEOUT_MS = 5000


@contextlib.asynccontextmanager
async def producer(admin: MQAdmin, *, retries: int = 2, group: str = PRODUCER_GROUP,
                   timeout_ms: int = SEND_TIMEOUT_MS) -> AsyncIterator[Producer]:
    """A started producer of the admin's name servers (signing with its credentials, if
    any); shut down on exit."""
    config = ClientConfig(namesrv_addr=";".join(admin.namesrv.addrs),
                          mq_client_api_timeout=timeout_ms,
                          credentials=admin.client.credentials)
    options = ProducerOptions(send_msg_timeout=timeout_ms, retry_times_when_send_failed=retries,
                              retry_times_when_send_async_failed=retries)
    p = Producer(group, config, options=options)
    await p.start()
    try:
        yield p
    finally:
        await p.shutdown()


async def require_topic(admin: MQAdmin, topic: str) -> None:
    """Refuse a topic no name server has a route for (the producer would fall back to
    TBW102 and have brokers create it), or one no producer can write now.

    Raises:
        TargetNotFound: no such topic.
        Unavailable: a broker name of the route has no master online (an outage).
        Forbidden: the topic's permission forbids writing.
    """
    try:
        route = await admin.namesrv.topic_route(topic)
    except TopicNotExistError:
        raise TargetNotFound(f"topic '{topic}' does not exist; create it with `mqadmin "
                             "updateTopic`.") from None
    masters = {d.broker_name for d in route.broker_datas if d.master_addr() is not None}
    if not any(is_writeable(q.perm) and q.broker_name in masters and q.write_queue_nums > 0
               for q in route.queue_datas):
        raise unwritable(topic, route)


def send_row(sent: Any) -> dict[str, Any]:
    """A `SendResult` as the rows of sendMessage and queryMsgById -s show it."""
    return {"brokerName": sent.message_queue.broker_name, "queueId": sent.message_queue.queue_id,
            "sendResult": sent.status.name, "msgId": sent.msg_id,
            "offsetMsgId": sent.offset_msg_id, "queueOffset": sent.queue_offset}


async def stored_as_sent(admin: MQAdmin, sent: SendResult, topic: str) -> bool:
    """Whether the message `sent` is stored in `topic` where the answer says (read back at
    its offset message id, under its message id)."""
    try:
        addr, offset = split_offset_msg_id(sent.offset_msg_id)
        record = await admin.broker.view_message_at(addr, offset)
    except (ValueError, ClientError):
        return False
    return record.topic == topic and record.msg_id == sent.msg_id

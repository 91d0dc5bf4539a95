"""CONSUMER_SEND_MSG_BACK (36): a consumer failed a message; retry it later or bury it in the DLQ.

How this works (request-codes.md §3.5): the failed message is read back from the commit log
by its offset and copied — same body, flag, properties (so UNIQ_KEY and KEYS survive), sysflag,
hosts and born time, reconsume times + 1, ORIGIN_MESSAGE_ID kept or set, RETRY_TOPIC set to the
topic it first failed on — into `%RETRY%<group>` with delay level `3 + reconsumeTimes` (or the
level the consumer asks for), which parks it in SCHEDULE_TOPIC_XXXX until due.  Past the
group's max reconsume times (or when the consumer asks with a negative level) it goes to
`%DLQ%<group>` instead: one queue, readable and writable (perm 6) as in Apache since 4.9.2;
nothing consumes it unless someone subscribes to it.  Each send-back stored counts in
SNDBCK_PUT_NUMS under "<RETRY_TOPIC>@<group>", as 4.9.8's and 5.3's `incSendBackNums` do.
"""

from __future__ import annotations

import logging
import random

from engine.broker.handlers.send import APPLY_TOPIC_TIP
from engine.broker.state import BrokerState
from engine.broker.topics import create_dlq, retry_topic
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.errors import ProtocolError
from engine.protocol.header.broker import ConsumerSendMsgBackRequestHeader
from engine.protocol.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
    decode_record,
    message_from_record,
    properties_to_string,
)
from engine.protocol.perm import PERM_RW, is_writeable
from engine.protocol.version import V3_4_9
from engine.protocol.wire import from_ext
from engine.remoting.router import RequestContext, Router
from engine.store.results import PutMessageStatus

log = logging.getLogger(__name__)

router = Router()

Ctx = RequestContext[BrokerState]

DEFAULT_FIRST_RETRY_LEVEL = 3  # 10 s with the default levels


@router.handles(RequestCode.CONSUMER_SEND_MSG_BACK)
def consumer_send_msg_back(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    st = ctx.state
    header = from_ext(ConsumerSendMsgBackRequestHeader, cmd.ext_fields)
    group = st.groups.find_or_create(header.group)
    if group is None:
        return cmd.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                            f"subscription group not exist, {header.group}{APPLY_TOPIC_TIP}")
    if not st.writable:
        return cmd.response(ResponseCode.NO_PERMISSION,
                            f"the broker[{st.config.broker_ip1}] sending message is forbidden")
    if group.retry_queue_nums <= 0:
        log.info("group %s has retryQueueNums 0: message at %d dropped instead of retried",
                 header.group, header.offset)
        return cmd.response(ResponseCode.SUCCESS)
    topic = retry_topic(header.group)
    config = st.topics.create_if_absent(topic, group.retry_queue_nums, PERM_RW)
    if not is_writeable(config.perm):
        return cmd.response(ResponseCode.NO_PERMISSION,
                            f"the topic[{topic}] sending message is forbidden")
    data = st.store.look_message_by_offset(header.offset)
    try:
        failed = decode_record(data) if data is not None else None
    except ProtocolError:
        failed = None
    if failed is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"look message by offset failed, {header.offset}")

    props = failed.properties()
    props.setdefault(PROPERTY_RETRY_TOPIC, failed.topic)
    props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
    if not props.get(PROPERTY_ORIGIN_MESSAGE_ID):
        props[PROPERTY_ORIGIN_MESSAGE_ID] = failed.offset_msg_id
    max_times = group.retry_max_times
    if cmd.version >= V3_4_9 and header.max_reconsume_times is not None:
        max_times = header.max_reconsume_times
    queue_id = random.randrange(max(config.write_queue_nums, 1))
    if failed.reconsume_times >= max_times or header.delay_level < 0:
        topic, queue_id = create_dlq(st.topics, header.group).topic_name, 0
        props[PROPERTY_DELAY_TIME_LEVEL] = "0"  # Apache's setDelayTimeLevel(0): kept as 0
        log.info("message %s of group %s failed %d times: moved to %s", props.get(
            PROPERTY_ORIGIN_MESSAGE_ID), header.group, failed.reconsume_times + 1, topic)
    else:
        level = header.delay_level or DEFAULT_FIRST_RETRY_LEVEL + failed.reconsume_times
        props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
    msg = message_from_record(
        failed, topic=topic, queue_id=queue_id, properties=properties_to_string(props),
        reconsume_times=failed.reconsume_times + 1, prepared_transaction_offset=0)
    result = st.store.append_message(msg)  # waitStoreMsgOK=false: no flush wait
    if result.status is not PutMessageStatus.PUT_OK:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"{result.status} {result.error_message}".strip())
    st.stats.on_put(topic, 1, len(msg.body))
    # SNDBCK_PUT_NUMS by "<topic it first failed on>@<group>", retried or dead-lettered alike
    st.stats.on_send_back(header.group, props[PROPERTY_RETRY_TOPIC])
    return cmd.response(ResponseCode.SUCCESS)

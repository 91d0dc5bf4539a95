"""SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE requests from messages, and their answers as `SendResult`.

How this works (client-behaviour.md §2.4, request-codes.md §3.2): a single message gets its
`UNIQ_KEY` if missing, is deflated when large (`compression.py`), and gets sysflag PREPARED
when it is a transaction's half message.  For ``%RETRY%`` topics the `RECONSUME_TIME` and
`MAX_RECONSUME_TIMES` properties move into the header's reconsumeTimes (`j`) and
maxReconsumeTimes (`l`).  The header is `SendMessageRequestHeaderV2`'s one-letter keys,
written directly (this is the producer's hot path); `send_header_v2` is the reference the
tests compare it with.  Answers 0/10/11/12 are results; any other code raises its
`ServerError`.
"""

from __future__ import annotations

import time

from engine.client.core.compression import (
    DEFAULT_COMPRESS_LEVEL,
    DEFAULT_COMPRESS_OVER,
    maybe_compress,
)
from engine.client.core.errors import BadResponseError, raise_for
from engine.client.core.ids import uniq_ids
from engine.client.core.message import PROPERTY_RECONSUME_TIME, Message
from engine.client.core.results import SendResult, SendStatus
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.codes import RequestCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.message import (
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_PREPARED_TYPE,
    properties_to_string,
)

RETRY_PREFIX = "%RETRY%"
DEFAULT_TOPIC = "TBW102"  # createTopicKey
_STORED = {0: SendStatus.SEND_OK, 10: SendStatus.FLUSH_DISK_TIMEOUT,
           12: SendStatus.FLUSH_SLAVE_TIMEOUT, 11: SendStatus.SLAVE_NOT_AVAILABLE}


def send_ext(*, group: str, topic: str, queue_id: int, sys_flag: int, born_ms: int, flag: int,
             properties: str, default_queue_nums: int, broker_name: str,
             reconsume_times: int = 0, max_reconsume_times: int | None = None,
             batch: bool = False) -> dict[str, str]:
    """`SendMessageRequestHeaderV2` as extFields (keys a..n, see `send_header_v2`)."""
    ext = {"a": group, "b": topic, "c": DEFAULT_TOPIC, "d": str(default_queue_nums),
           "e": str(queue_id), "f": str(sys_flag), "g": str(born_ms), "h": str(flag),
           "i": properties, "j": str(reconsume_times), "k": "false",
           "m": "true" if batch else "false", "n": broker_name}
    if max_reconsume_times is not None:
        ext["l"] = str(max_reconsume_times)
    return ext


def prepare_message(msg: Message) -> tuple[dict[str, str], str]:
    """The wire properties of `msg` with a `UNIQ_KEY`, and that key."""
    props = msg.properties_map()
    uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if not uniq:
        uniq = props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq_ids().next()
    return props, uniq


def single_request(msg: Message, props: dict[str, str], mq: MessageQueue, *, group: str,
                   default_queue_nums: int = 4, compress_over: int = DEFAULT_COMPRESS_OVER,
                   compress_level: int = DEFAULT_COMPRESS_LEVEL,
                   oneway: bool = False) -> RemotingCommand:
    """SEND_MESSAGE_V2 for one message already given its properties (`prepare_message`)."""
    body, sys_flag = maybe_compress(msg.body, compress_over, compress_level)
    if props.get(PROPERTY_TRANSACTION_PREPARED) == "true":
        sys_flag |= TRANSACTION_PREPARED_TYPE
    reconsume, max_reconsume = 0, None
    if mq.topic.startswith(RETRY_PREFIX):
        props = dict(props)
        text = props.pop(PROPERTY_RECONSUME_TIME, None)
        if text is not None and text.lstrip("-").isdigit():
            reconsume = int(text)
        text = props.pop(PROPERTY_MAX_RECONSUME_TIMES, None)
        if text is not None and text.lstrip("-").isdigit():
            max_reconsume = int(text)
    ext = send_ext(group=group, topic=mq.topic, queue_id=mq.queue_id, sys_flag=sys_flag,
                   born_ms=int(time.time() * 1000), flag=msg.flag,
                   properties=properties_to_string(props),
                   default_queue_nums=default_queue_nums, broker_name=mq.broker_name,
                   reconsume_times=reconsume, max_reconsume_times=max_reconsume)
    return request(RequestCode.SEND_MESSAGE_V2, ext, body, oneway=oneway)


def batch_request(body: bytes, mq: MessageQueue, *, group: str, wait_store_msg_ok: bool,
                  default_queue_nums: int = 4, oneway: bool = False) -> RemotingCommand:
    """SEND_BATCH_MESSAGE: batch-wide header, properties = the batch's own `WAIT`."""
    ext = send_ext(group=group, topic=mq.topic, queue_id=mq.queue_id, sys_flag=0,
                   born_ms=int(time.time() * 1000), flag=0,
                   properties=f"WAIT\x01{'true' if wait_store_msg_ok else 'false'}",
                   default_queue_nums=default_queue_nums, broker_name=mq.broker_name,
                   batch=True)
    return request(RequestCode.SEND_BATCH_MESSAGE, ext, body, oneway=oneway)


def send_result(cmd: RemotingCommand, mq: MessageQueue, msg_id: str, addr: str) -> SendResult:
    """`processSendResponse`.

    Raises:
        ServerError: any code but 0, 10, 11, 12.
        BadResponseError: a stored answer without its header fields.
    """
    status = _STORED.get(cmd.code)
    if status is None:
        raise_for(cmd, addr)
        raise BadResponseError(f"send answered code {cmd.code}", addr)
    ext = cmd.ext_fields or {}
    try:
        queue_id = int(ext["queueId"])
        queue_offset = int(ext["queueOffset"])
        offset_msg_id = ext["msgId"]
    except (KeyError, ValueError) as exc:
        raise BadResponseError(f"send answer lacks its header: {exc}", addr) from None
    return SendResult(
        status=status, msg_id=msg_id, offset_msg_id=offset_msg_id,
        message_queue=MessageQueue(mq.topic, mq.broker_name, queue_id),
        queue_offset=queue_offset, transaction_id=ext.get("transactionId"),
        region_id=ext.get("MSG_REGION") or "DefaultRegion",
        trace_on=ext.get("TRACE_ON") != "false")

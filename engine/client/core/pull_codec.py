"""PULL_MESSAGE requests and their answers as `PullResult` (request-codes.md §3.3).

How this works: the request's sysflag says whether the pull carries the consumer's offset
(bit 0), may be held by the broker until messages arrive (bit 1), carries its own
subscription (bit 2) or is a lite pull (bit 4).  An answer 0/19/20/21 becomes a `PullResult`;
on FOUND the records are decoded, inflated, filtered again by exact tag when the subscription
names tags (the broker only compared hash codes), given MIN_OFFSET/MAX_OFFSET, and -
for messages redelivered through ``%RETRY%<group>`` - their original topic back.
"""

from __future__ import annotations

from engine.client.core.compression import inflate
from engine.client.core.errors import BadResponseError, raise_for
from engine.client.core.message import PROPERTY_MAX_OFFSET, PROPERTY_MIN_OFFSET, MessageExt
from engine.client.core.results import PullResult, PullStatus
from engine.protocol.body.heartbeat import SubscriptionData
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.codes import RequestCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.errors import ProtocolError
from engine.protocol.message import (
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TAGS,
    MessageRecord,
    decode_records,
    string_to_properties,
)

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8
FLAG_LITE_PULL = 0x10

_STATUS = {0: PullStatus.FOUND, 19: PullStatus.NO_NEW_MSG, 20: PullStatus.NO_MATCHED_MSG,
           21: PullStatus.OFFSET_ILLEGAL}


def pull_sys_flag(*, commit_offset: bool, suspend: bool, subscription: bool,
                  class_filter: bool = False, lite_pull: bool = False) -> int:
    """`PullSysFlag.buildSysFlag`."""
    return ((FLAG_COMMIT_OFFSET if commit_offset else 0) | (FLAG_SUSPEND if suspend else 0)
            | (FLAG_SUBSCRIPTION if subscription else 0)
            | (FLAG_CLASS_FILTER if class_filter else 0) | (FLAG_LITE_PULL if lite_pull else 0))


def pull_request(group: str, mq: MessageQueue, offset: int, sub: SubscriptionData, *,
                 max_nums: int, sys_flag: int, commit_offset: int,
                 suspend_ms: int) -> RemotingCommand:
    """`PullMessageRequestHeader` as extFields (written directly: a hot path).  The
    subscription string travels only when `sys_flag` has FLAG_SUBSCRIPTION, as in Java."""
    ext = {"consumerGroup": group, "topic": mq.topic, "queueId": str(mq.queue_id),
           "queueOffset": str(offset), "maxMsgNums": str(max_nums), "sysFlag": str(sys_flag),
           "commitOffset": str(commit_offset), "suspendTimeoutMillis": str(suspend_ms),
           "subVersion": str(sub.sub_version), "expressionType": sub.expression_type.value,
           "bname": mq.broker_name}
    if sys_flag & FLAG_SUBSCRIPTION:
        ext["subscription"] = sub.sub_string
    return request(RequestCode.PULL_MESSAGE, ext)


def pull_result(cmd: RemotingCommand, mq: MessageQueue, sub: SubscriptionData | None,
                group: str, addr: str) -> PullResult:
    """`processPullResponse` + `processPullResult`.

    Raises:
        ServerError: any code but 0, 19, 20, 21.
        BadResponseError: the header or the records do not decode.
    """
    status = _STATUS.get(cmd.code)
    if status is None:
        raise_for(cmd, addr)
        raise BadResponseError(f"pull answered code {cmd.code}", addr)
    ext = cmd.ext_fields or {}
    try:
        next_begin = int(ext["nextBeginOffset"])
        min_offset = int(ext["minOffset"])
        max_offset = int(ext["maxOffset"])
        suggest = int(ext.get("suggestWhichBrokerId") or 0)
    except (KeyError, ValueError) as exc:
        raise BadResponseError(f"pull answer lacks its header: {exc}", addr) from None
    messages: list[MessageExt] = []
    if status is PullStatus.FOUND and cmd.body:
        messages = decode_messages(cmd.body, mq.broker_name, group, min_offset, max_offset, addr)
        if sub is not None and sub.tags_set and not sub.class_filter_mode:
            tags = sub.tags_set
            messages = [m for m in messages if m.properties.get(PROPERTY_TAGS) in tags]
    return PullResult(status, next_begin, min_offset, max_offset, messages, suggest)


def message_ext(r: MessageRecord, broker_name: str, props: dict[str, str] | None = None,
                retry_topic: str | None = None) -> MessageExt:
    """One decoded record as a `MessageExt`: body inflated, original topic restored when the
    record sits in `retry_topic`."""
    if props is None:
        props = string_to_properties(r.properties_raw.decode())
    topic = r.topic
    if topic == retry_topic:
        topic = props.get(PROPERTY_RETRY_TOPIC) or topic
    return MessageExt(
        topic, inflate(r.body, r.sysflag), props, broker_name, r.queue_id, r.queue_offset,
        r.physical_offset, r.sysflag, r.flag, r.born_timestamp, r.born_host,
        r.store_timestamp, r.store_host, r.reconsume_times, r.prepared_transaction_offset,
        r.body_crc, r.total_size, r.topic)


def decode_messages(body: bytes, broker_name: str, group: str | None, min_offset: int,
                    max_offset: int, addr: str | None = None) -> list[MessageExt]:
    """Records of a pull answer as `MessageExt`s (see the module docstring)."""
    try:
        records = decode_records(body)
    except ProtocolError as exc:
        raise BadResponseError(f"pulled records do not decode: {exc}", addr) from None
    retry = "%RETRY%" + group if group else None
    lo, hi = str(min_offset), str(max_offset)
    out: list[MessageExt] = []
    for r in records:
        props = string_to_properties(r.properties_raw.decode())
        props[PROPERTY_MIN_OFFSET] = lo
        props[PROPERTY_MAX_OFFSET] = hi
        out.append(message_ext(r, broker_name, props, retry))
    return out

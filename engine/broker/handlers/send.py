"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

How this works: the header (V2's one-letter keys are turned into V1 first) is checked as 4.9.7
does — broker writable, topic name, topic not reserved, topic known or auto-created from its
template, queue id in range — then the message goes to the store.  Under ASYNC_FLUSH on an
ASYNC_MASTER the handler answers inline; under SYNC_FLUSH and/or on a SYNC_MASTER (and WAIT
not false) it returns an awaitable that answers once the group commit has the bytes on disk
and/or a slave acknowledged them (`HAService.replicate`: FLUSH_SLAVE_TIMEOUT after
slaveTimeout, SLAVE_NOT_AVAILABLE without a usable slave; the message stays stored).  Every
answer on a stored message carries msgId, queueId, queueOffset, MSG_REGION and TRACE_ON, which
Java clients read unconditionally.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Coroutine
from functools import lru_cache
from typing import Any

from engine.broker.errors import Refused
from engine.broker.state import BrokerState
from engine.broker.topics import (
    NOT_ALLOWED_SEND,
    RETRY_PREFIX,
    create_dlq,
    topic_name_problem,
)
from engine.broker.transaction import half_message
from engine.protocol import native
from engine.protocol.body.topic import TopicConfig, TopicFilterType
from engine.protocol.codes import RequestCode, ResponseCode, SerializeType
from engine.protocol.command import RemotingCommand
from engine.protocol.errors import HeaderError, ProtocolError
from engine.protocol.header.broker import (
    SendHeader,
    SendMessageResponseHeader,
    decode_send_header_v1,
    decode_send_header_v2,
)
from engine.protocol.message import (
    MULTI_TAGS_FLAG,
    NAME_VALUE_SEPARATOR,
    PROPERTY_CLUSTER,
    PROPERTY_REAL_TOPIC,
    PROPERTY_SEPARATOR,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    BatchMessage,
    BrokerMessage,
    decode_record,
    property_value,
    string_to_properties,
)
from engine.protocol.perm import PERM_RW, is_writeable
from engine.protocol.recall import RecallHandle
from engine.protocol.receipt import is_pop_retry_topic_v2
from engine.protocol.send_answer import send_answer
from engine.protocol.version import V3_4_9
from engine.protocol.wire import to_ext
from engine.remoting.address import parse_addr
from engine.remoting.router import RequestContext, Router
from engine.store.config import BrokerRole, FlushDiskType
from engine.store.delay_levels import delay_level
from engine.store.record_scan import TIMER_TOPIC
from engine.store.results import PutMessageResult, PutMessageStatus
from engine.store.timer.transform import TIMER_KEYS, TIMER_MARK

log = logging.getLogger(__name__)

router = Router()

Ctx = RequestContext[BrokerState]
Answer = RemotingCommand | bytes | Awaitable[RemotingCommand | bytes]

APPLY_TOPIC_TIP = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
SERVICE_NOT_AVAILABLE_REMARK = (
    "service not available now. It may be caused by one of the following reasons: the broker's "
    "disk is full, messages are put to the slave, message store has been shut down, etc.")

_STATUS_CODES = {
    PutMessageStatus.PUT_OK: ResponseCode.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}

_TIMER_CODES = {
    PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL: ResponseCode.SYSTEM_ERROR,
    PutMessageStatus.WHEEL_TIMER_NOT_ENABLE: ResponseCode.SYSTEM_ERROR,
}


def _header(cmd: RemotingCommand) -> SendHeader:
    if cmd.code == RequestCode.SEND_MESSAGE:
        return decode_send_header_v1(cmd.ext_fields)
    return decode_send_header_v2(cmd.ext_fields)


#: 5.3.3's answer to a send to a V2 POP retry topic ``%RETRY%G+T``: its `msgCheck` validates
#: every topic name, known or not, and "+" is no topic character (so 5.3.3 never reaches
#: `KeyBuilder.parseGroup` for such a send; verified against 5.3.3 with enableRetryTopicV2).
_V2_RETRY_REFUSAL = ("The specified topic contains illegal characters, allowing only "
                     "^[%|a-zA-Z0-9_-]+$")


def _check_topic(st: BrokerState, header: SendHeader, peer: str) -> TopicConfig:
    """msgCheck: the topic config to store under, auto-created when allowed."""
    cfg = st.config
    if st.is_slave:
        raise Refused(ResponseCode.SERVICE_NOT_AVAILABLE,
                          f"the broker[{cfg.broker_addr}] is a slave of {cfg.broker_name} and "
                          f"read-only; send to its master ({st.master_addr or 'not known yet'}). "
                          + SERVICE_NOT_AVAILABLE_REMARK)
    if not is_writeable(cfg.broker_permission):
        raise Refused(ResponseCode.NO_PERMISSION,
                          f"the broker[{cfg.broker_ip1}] sending message is forbidden")
    topic = header.topic
    if topic in NOT_ALLOWED_SEND:
        raise Refused(ResponseCode.NO_PERMISSION,
                          f"Sending message to topic[{topic}] is forbidden.")
    if is_pop_retry_topic_v2(topic):  # the broker's own, spelt with a "+" no send may use
        raise Refused(ResponseCode.INVALID_PARAMETER, _V2_RETRY_REFUSAL)
    config = st.topics.get(topic)
    if config is None:  # known topics were validated when they were created
        problem = topic_name_problem(topic)
        if problem is not None:
            raise Refused(ResponseCode.SYSTEM_ERROR, problem)
        if topic.startswith(RETRY_PREFIX):
            config = st.topics.create_if_absent(topic, 1, PERM_RW)
        else:
            config = st.topics.create_in_send(topic, header.default_topic,
                                              header.default_topic_queue_nums)
        if config is None:
            raise Refused(ResponseCode.TOPIC_NOT_EXIST,
                              f"topic[{topic}] not exist, apply first please!{APPLY_TOPIC_TIP}")
    valid = max(config.write_queue_nums, config.read_queue_nums)
    if header.queue_id >= valid:
        raise Refused(ResponseCode.SYSTEM_ERROR,
                          f"request queueId[{header.queue_id}] is illegal, {config} "
                          f"Producer: {peer}")
    if not is_writeable(config.perm):
        raise Refused(ResponseCode.NO_PERMISSION,
                          f"the topic[{topic}] sending message is forbidden")
    return config


def _dlq_redirect(st: BrokerState, cmd: RemotingCommand, header: SendHeader,
                  topic: str, queue_id: int) -> tuple[str, int]:
    """A %RETRY% message past its max reconsume times goes to the group's %DLQ% topic."""
    if not topic.startswith(RETRY_PREFIX):
        return topic, queue_id
    group = topic[len(RETRY_PREFIX):]
    sub = st.groups.get(group)
    if sub is None:
        raise Refused(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                          f"subscription group not exist, {group}{APPLY_TOPIC_TIP}")
    max_times = sub.retry_max_times
    if cmd.version >= V3_4_9 and header.max_reconsume_times is not None:
        max_times = header.max_reconsume_times
    if (header.reconsume_times or 0) < max_times:
        return topic, queue_id
    return create_dlq(st.topics, group).topic_name, 0


_WAIT = PROPERTY_WAIT_STORE_MSG_OK + NAME_VALUE_SEPARATOR
_CLUSTER = PROPERTY_CLUSTER + NAME_VALUE_SEPARATOR
_TRAN = PROPERTY_TRANSACTION_PREPARED + NAME_VALUE_SEPARATOR


def _find_property(props: str, key: str) -> int:
    """Where the ``key\x01`` entry starts in a properties string, or -1."""
    if props.startswith(key):
        return 0
    i = props.find(PROPERTY_SEPARATOR + key)
    return i + 1 if i >= 0 else -1


def _strip_wait(props: str) -> tuple[str, bool]:
    """Remove WAIT from the stored properties (still honoured); returns (props, wait)."""
    fast = native.strip_wait
    if fast is not None:
        stripped = fast(props)
        if stripped is not None:
            return stripped
    start = _find_property(props, _WAIT)
    if start < 0:
        return props, True
    end = props.find(PROPERTY_SEPARATOR, start)
    value = props[start + len(_WAIT): end if end >= 0 else len(props)]
    rest = props[:start] + props[end + 1:] if end >= 0 else props[:max(start - 1, 0)]
    return rest, value.strip().lower() != "false"


def _is_half(st: BrokerState, props: str, reconsume_times: int) -> bool:
    """Whether a single message is a transactional half message; refuses what cannot be one."""
    if _TRAN not in props or property_value(props, PROPERTY_TRANSACTION_PREPARED) != "true":
        return False  # the substring test first: this runs on every send
    delayed = delay_level(props) > 0
    if reconsume_times > 0 and delayed:  # a retry from a client older than 4.6.1: a normal one
        return False
    if st.config.reject_transaction_message:
        raise Refused(ResponseCode.NO_PERMISSION,
                          f"the broker[{st.config.broker_ip1}] sending transaction "
                          "message is forbidden")
    if delayed:
        raise Refused(ResponseCode.MESSAGE_ILLEGAL,
                          "a transactional message cannot have a delay level (DELAY); send it "
                          "without one")
    if TIMER_MARK in props and _is_timer(props):  # 5.x clients refuse it too (docs/timers.md)
        raise Refused(ResponseCode.MESSAGE_ILLEGAL,
                          "a transactional message cannot be a timer message (TIMER_DELIVER_MS, "
                          "TIMER_DELAY_SEC, TIMER_DELAY_MS); send it without them")
    return True


def _is_timer(props: str) -> bool:
    return any(property_value(props, key) is not None for key in TIMER_KEYS)


def _refuse_in_batch(props: str) -> None:
    if property_value(props, PROPERTY_TRANSACTION_PREPARED) == "true":
        raise Refused(ResponseCode.MESSAGE_ILLEGAL,
                          "transactional messages cannot be sent in a batch; send each with "
                          "sendMessageInTransaction")
    if delay_level(props) > 0:
        raise Refused(ResponseCode.MESSAGE_ILLEGAL,
                          "batch messages cannot have a delay level (DELAY); send delayed "
                          "messages one by one")


def recall_handle(st: BrokerState, result: PutMessageResult) -> str | None:
    """The recall handle of a message the store parked as a timer (5.3.3
    `attachRecallHandle`): read back from the parked record, whose TIMER_OUT_MS is its slot;
    None when it was not parked (due already) or is a retry."""
    data = st.store.look_message_by_offset(result.wrote_offset, result.wrote_bytes)
    if data is None:
        return None
    try:
        record = decode_record(data)
    except ProtocolError:
        return None
    if record.topic != TIMER_TOPIC:
        return None
    props = record.properties()
    out_ms, real_topic = props.get(PROPERTY_TIMER_OUT_MS), props.get(PROPERTY_REAL_TOPIC)
    if not out_ms or not out_ms.isdigit() or not real_topic or real_topic.startswith(
            RETRY_PREFIX):
        return None
    return RecallHandle(real_topic, st.config.broker_name, str(int(out_ms) + 1),
                        props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "null")).encode()


def _answer(st: BrokerState, cmd: RemotingCommand, result: PutMessageResult, topic: str,
            queue_id: int, nums: int, size: int, timer: bool = False) -> RemotingCommand | bytes:
    """The answer to a send: for a stored message on a JSON request, its encoded frame.  A
    `timer` message (one that may have been parked) gets its recall handle, if it has one."""
    code = _STATUS_CODES.get(result.status)
    if code is None:
        return cmd.response(*_failure(st, result))
    st.stats.on_put(topic, nums, size)
    cfg = st.config
    handle = recall_handle(st, result) if timer else None
    if code == ResponseCode.SUCCESS and handle is None:
        answer = send_answer(cfg.region_id, cfg.trace_on)
        if cmd.serialize_type is SerializeType.JSON:
            return answer.encode(cmd.opaque, result.msg_id, queue_id, result.queue_offset)
        return answer.encode_binary(cmd.opaque, result.msg_id, queue_id, result.queue_offset)
    ext = to_ext(SendMessageResponseHeader(result.msg_id, queue_id, result.queue_offset,
                                           recall_handle=handle))
    ext["MSG_REGION"] = cfg.region_id
    ext["TRACE_ON"] = "true" if cfg.trace_on else "false"
    return cmd.response(code, None if code == ResponseCode.SUCCESS else result.status.value,
                        ext_fields=ext)


def _failure(st: BrokerState, result: PutMessageResult) -> tuple[int, str]:
    status = result.status
    detail = f" ({result.error_message})" if result.error_message else ""
    if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
        log.warning("message refused as illegal: %s", result.error_message or status.value)
        remark = (f"the message is illegal, maybe msg body or properties length not matched. "
                  f"msg body length limit {st.store_config.max_message_size}B, msg properties "
                  f"length limit 32KB.")
        # Over a size limit: Apache 4.9.8's and 5.3.3's words exactly.  A batch body that is
        # malformed (which Apache does not check): the same words, and what is wrong.
        if "exceed" in result.error_message or not detail:
            return ResponseCode.MESSAGE_ILLEGAL, remark
        return ResponseCode.MESSAGE_ILLEGAL, remark + detail
    if status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
        return ResponseCode.SERVICE_NOT_AVAILABLE, SERVICE_NOT_AVAILABLE_REMARK + detail
    if status is PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH:  # 5.3.3's words exactly
        return ResponseCode.SYSTEM_ERROR, "in-sync replicas not enough"
    if status in _TIMER_CODES:  # timer messages: as 5.x SendMessageProcessor answers
        return _TIMER_CODES[status], result.error_message
    if status is PutMessageStatus.OS_PAGECACHE_BUSY:
        return ResponseCode.SYSTEM_ERROR, "[PC_SYNCHRONIZED]broker busy, start flow control " \
                                          "for a while"
    if status is PutMessageStatus.CREATE_MAPEDFILE_FAILED:
        return ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or " \
                                          "broken." + detail
    return ResponseCode.SYSTEM_ERROR, f"UNKNOWN_ERROR{detail}"


@lru_cache(maxsize=4096)
def _born_host(remote_addr: str) -> tuple[str, int]:
    """The BORNHOST of a connection's messages (its peer address)."""
    try:
        return parse_addr(remote_addr)
    except ValueError:
        return ("127.0.0.1", 0)


def _must_wait(st: BrokerState, wait: bool) -> bool:
    cfg = st.store_config
    return wait and (cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
                     or cfg.broker_role is BrokerRole.SYNC_MASTER)


async def _stored(st: BrokerState, put: Coroutine[Any, Any, PutMessageResult]
                  ) -> PutMessageResult:
    """The put's result once flushed (SYNC_FLUSH) and replicated (SYNC_MASTER)."""
    result = await put
    ha = st.ha
    if ha is not None and st.store_config.broker_role is BrokerRole.SYNC_MASTER:
        result = await ha.replicate(result, st.config.slave_timeout)
    return result


Prepared = tuple[BrokerMessage, str, int, bool]
"""A message ready for the store, with the topic and queue id its answer names, and whether
its answer waits for the flush and/or the slave (`_must_wait`)."""


def _prepare(ctx: Ctx, cmd: RemotingCommand) -> Prepared | Answer:
    """A single send checked and turned into the message to store, or its answer already (a
    refusal, a batch, or an awaitable when the answer must wait for a flush or a slave)."""
    st = ctx.state
    try:
        header = _header(cmd)
    except HeaderError as exc:  # a send's own error: producers do not retry it
        return cmd.response(ResponseCode.MESSAGE_ILLEGAL, str(exc))
    if header.batch and cmd.code != RequestCode.SEND_MESSAGE:
        return _send_batch(ctx, cmd, header)
    peer = ctx.connection.remote_addr
    reconsume_times = header.reconsume_times or 0
    try:
        config = _check_topic(st, header, peer)
        props, wait = _strip_wait(header.properties or "")
        half = _is_half(st, props, reconsume_times)
        queue_id = header.queue_id
        if queue_id < 0:
            queue_id = random.randrange(config.write_queue_nums)
        topic, queue_id = _dlq_redirect(st, cmd, header, header.topic, queue_id)
    except Refused as refused:
        return cmd.response(refused.code, refused.remark)
    sysflag = header.sys_flag
    if config.topic_filter_type is TopicFilterType.MULTI_TAG:
        sysflag |= MULTI_TAGS_FLAG
    props = _with_cluster(props, st.config.broker_cluster_name)
    body = cmd.body or b""
    msg = BrokerMessage(topic, body, queue_id, header.flag, props, sysflag,
                        header.born_timestamp, _born_host(peer), st.store_host, reconsume_times)
    if half:
        msg = half_message(st, msg)
    return msg, topic, queue_id, _must_wait(st, wait)


async def _answer_stored(st: BrokerState, cmd: RemotingCommand,
                         put: Coroutine[Any, Any, PutMessageResult], topic: str, queue_id: int,
                         size: int, timer: bool) -> RemotingCommand | bytes:
    return _answer(st, cmd, await _stored(st, put), topic, queue_id, 1, size, timer)


@router.handles(RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)
def send_message(ctx: Ctx, cmd: RemotingCommand) -> Answer:
    prepared = _prepare(ctx, cmd)
    if not isinstance(prepared, tuple):
        return prepared
    msg, topic, queue_id, wait = prepared
    st = ctx.state
    timer = TIMER_MARK in msg.properties
    if wait:
        return _answer_stored(st, cmd, st.store.put_message(msg), topic, queue_id, len(msg.body),
                              timer)
    return _answer(st, cmd, st.store.append_message(msg), topic, queue_id, 1, len(msg.body),
                   timer)


@router.handles_many(RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)
def send_messages(ctx: Ctx, cmds: list[RemotingCommand]) -> list[Answer | Exception]:
    """Sends read together: each prepared as `send_message` does, the messages ready to
    store appended with one `append_many`, answers in order (those that wait for a flush or
    a slave as awaitables of the appended result: one group commit serves them all)."""
    answers: list[Answer | Exception] = []
    ready: list[tuple[int, RemotingCommand, Prepared]] = []
    for cmd in cmds:
        try:
            prepared = _prepare(ctx, cmd)
        except Exception as exc:  # answered by the dispatcher, as a failed single handler
            answers.append(exc)
            continue
        if isinstance(prepared, tuple):
            ready.append((len(answers), cmd, prepared))
            answers.append(b"")  # replaced below
        else:
            answers.append(prepared)
    if ready:
        st = ctx.state
        results = st.store.append_many([prepared[0] for _, _, prepared in ready])
        for (i, cmd, (msg, topic, queue_id, wait)), result in zip(ready, results, strict=True):
            timer = TIMER_MARK in msg.properties
            if wait:
                answers[i] = _answer_stored(st, cmd, st.store.flushed(result), topic, queue_id,
                                            len(msg.body), timer)
            else:
                answers[i] = _answer(st, cmd, result, topic, queue_id, 1, len(msg.body), timer)
    return answers


def _with_cluster(props: str, cluster: str) -> str:
    entry = _CLUSTER + cluster
    if _find_property(props, _CLUSTER) >= 0:
        parsed = string_to_properties(props)
        parsed[PROPERTY_CLUSTER] = cluster
        return PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in parsed.items())
    return f"{props}{PROPERTY_SEPARATOR}{entry}" if props else entry


@router.handles(RequestCode.SEND_BATCH_MESSAGE)
def send_batch(ctx: Ctx, cmd: RemotingCommand) -> Answer:
    try:
        header = _header(cmd)
    except HeaderError as exc:
        return cmd.response(ResponseCode.MESSAGE_ILLEGAL, str(exc))
    return _send_batch(ctx, cmd, header)


def _send_batch(ctx: Ctx, cmd: RemotingCommand, header: SendHeader) -> Answer:
    st = ctx.state
    try:
        if header.topic.startswith(RETRY_PREFIX):
            raise Refused(ResponseCode.MESSAGE_ILLEGAL,
                              f"batch request does not support retry group {header.topic}")
        config = _check_topic(st, header, ctx.connection.remote_addr)
        props, wait = _strip_wait(header.properties or "")
        _refuse_in_batch(props)
    except Refused as refused:
        return cmd.response(refused.code, refused.remark)
    queue_id = header.queue_id
    if queue_id < 0:
        queue_id = random.randrange(config.write_queue_nums)
    sysflag = header.sys_flag
    if config.topic_filter_type is TopicFilterType.MULTI_TAG:
        sysflag |= MULTI_TAGS_FLAG
    body = cmd.body or b""
    batch = BatchMessage(
        topic=header.topic, body=body, queue_id=queue_id,
        properties=_with_cluster(props, st.config.broker_cluster_name), sysflag=sysflag,
        born_timestamp=header.born_timestamp, born_host=_born_host(ctx.connection.remote_addr),
        store_host=st.store_host, reconsume_times=header.reconsume_times or 0)
    if _must_wait(st, wait):
        async def stored() -> RemotingCommand | bytes:
            result = await _stored(st, st.store.put_messages(batch))
            return _answer(st, cmd, result, header.topic, queue_id, result.msg_num, len(body))
        return stored()
    result = st.store.append_messages(batch)
    return _answer(st, cmd, result, header.topic, queue_id, result.msg_num, len(body))

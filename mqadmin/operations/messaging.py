"""Client requests mqadmin sends itself: send a message, pull a queue, heartbeat, send back.

How this works: the message commands (sendMessage, printMsg, consumeMessage, ...) and the
dev cluster's demo traffic need a producer and a pull consumer, the same few requests
Apache's tools make through DefaultMQProducer and DefaultMQPullConsumer: SEND_MESSAGE_V2
with a client-made unique id (UNIQ_KEY), PULL_MESSAGE with the subscription in the request
and no offset commit (group ``TOOLS_CONSUMER``, which brokers create at start), HEART_BEAT
and CONSUMER_SEND_MSG_BACK.  A pull answer's records are decoded (and zlib bodies inflated)
as the admin client decodes query answers; tags are filtered again on this side, as Java
clients do, since the broker filters by tag hash only.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import struct
import time
from dataclasses import dataclass, field
from enum import StrEnum

from engine.client.broker_admin_messages import parse_records
from engine.client.errors import BadResponseError, UnreachableError, raise_for
from engine.protocol import fastjson
from engine.protocol.body.heartbeat import (
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    ProducerData,
    SubscriptionData,
)
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.errors import ProtocolError
from engine.protocol.header.broker import (
    ConsumerSendMsgBackRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    send_header_v2,
)
from engine.protocol.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    MessageRecord,
    properties_to_string,
)
from engine.protocol.wire import from_ext, to_ext, to_json
from engine.remoting.client import RemotingClient
from engine.remoting.errors import RemotingError

TOOLS_GROUP = "TOOLS_CONSUMER"  # MixAll.TOOLS_CONSUMER_GROUP
PRODUCER_GROUP = "MQADMIN_PRODUCER"
DEFAULT_TOPIC = "TBW102"
PULL_BATCH = 32
TIMEOUT = 5.0

# PullSysFlag bits
FLAG_COMMIT_OFFSET = 0x1
FLAG_SUBSCRIPTION = 0x4

#: Send answers that mean "stored, with a caveat" (SendStatus other than SEND_OK).
SEND_STATUS: dict[int, str] = {
    ResponseCode.SUCCESS: "SEND_OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}


class PullStatus(StrEnum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


PULL_STATUS: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(frozen=True, slots=True)
class SendResult:
    status: str
    msg_id: str  # the client-made UNIQ_KEY
    offset_msg_id: str
    broker_name: str
    queue_id: int
    queue_offset: int
    rt_ms: float


@dataclass(frozen=True, slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageRecord] = field(default_factory=list)


# ---------------------------------------------------------------------------- unique ids

_COUNTER = itertools.count(random.randrange(1 << 16))
_FIX = struct.Struct(">4sHI")  # ip, pid, a random stand-in for Java's class-loader hash
_TIME = struct.Struct(">iH")  # ms since the start of the month, counter


def _fix_prefix() -> bytes:
    try:
        ip = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        ip = b"\x7f\x00\x00\x01"
    return _FIX.pack(ip, os.getpid() & 0xFFFF, random.getrandbits(32))


_PREFIX = _fix_prefix()


def unique_id(now_ms: int | None = None) -> str:
    """A message id in the layout of Java's `MessageClientIDSetter` (32 hex digits)."""
    now = time.time() if now_ms is None else now_ms / 1000
    start = time.localtime(now)
    month = time.mktime((start.tm_year, start.tm_mon, 1, 0, 0, 0, 0, 0, -1))
    diff = int((now - month) * 1000) & 0x7FFFFFFF
    return (_PREFIX + _TIME.pack(diff, next(_COUNTER) & 0xFFFF)).hex().upper()


# ---------------------------------------------------------------------------- requests


async def _invoke(client: RemotingClient, addr: str, cmd: RemotingCommand,
                  timeout: float) -> RemotingCommand:
    try:
        return await client.invoke(addr, cmd, timeout)
    except RemotingError as exc:
        raise UnreachableError([(addr, exc)], role="broker") from None


async def send(client: RemotingClient, addr: str, broker_name: str, topic: str, body: bytes,
               *, queue_id: int = -1, tags: str | None = None, keys: str | None = None,
               properties: dict[str, str] | None = None, group: str = PRODUCER_GROUP,
               reconsume_times: int | None = None, timeout: float = TIMEOUT) -> SendResult:
    """SEND_MESSAGE_V2 of one message to queue `queue_id` of the broker at `addr`.

    Raises:
        ServerError: the broker refused it (no such topic, no permission, ...).
        UnreachableError: the broker did not answer.
    """
    msg_id = unique_id()
    props: dict[str, str | None] = {**(properties or {}), PROPERTY_TAGS: tags,
                                    PROPERTY_KEYS: keys, PROPERTY_WAIT_STORE_MSG_OK: "true",
                                    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: msg_id}
    header = SendMessageRequestHeader(
        producer_group=group, topic=topic, default_topic=DEFAULT_TOPIC,
        default_topic_queue_nums=4, queue_id=queue_id, sys_flag=0,
        born_timestamp=int(time.time() * 1000), flag=0,
        properties=properties_to_string(props), reconsume_times=reconsume_times,
        bname=broker_name)
    cmd = request(RequestCode.SEND_MESSAGE_V2, to_ext(send_header_v2(header)), body)
    started = time.perf_counter()
    resp = await _invoke(client, addr, cmd, timeout)
    rt = (time.perf_counter() - started) * 1000
    status = SEND_STATUS.get(resp.code)
    if status is None:
        raise_for(resp, addr)
        raise BadResponseError(f"send answered code {resp.code}", addr)
    try:
        answer = from_ext(SendMessageResponseHeader, resp.ext_fields)
    except ProtocolError as exc:
        raise BadResponseError(f"send answer header does not decode: {exc}", addr) from None
    return SendResult(status, msg_id, answer.msg_id, broker_name, answer.queue_id,
                      answer.queue_offset, rt)


def _tags_of(subscription: str) -> frozenset[str] | None:
    """The tags of a TAG expression, None for everything."""
    if not subscription or subscription.strip() == "*":
        return None
    return frozenset(t.strip() for t in subscription.split("||") if t.strip())


async def pull(client: RemotingClient, addr: str, topic: str, queue_id: int, offset: int, *,
               max_nums: int = PULL_BATCH, subscription: str = "*",
               group: str = TOOLS_GROUP, commit_offset: int | None = None,
               broker_name: str | None = None, timeout: float = TIMEOUT) -> PullResult:
    """PULL_MESSAGE without suspending: up to `max_nums` messages from `offset`.

    Raises:
        ServerError: the broker refused the pull (no such topic or group, no permission).
        UnreachableError: the broker did not answer.
    """
    flag = FLAG_SUBSCRIPTION | (FLAG_COMMIT_OFFSET if commit_offset is not None else 0)
    header = PullMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset,
        max_msg_nums=max_nums, sys_flag=flag, commit_offset=commit_offset or 0,
        suspend_timeout_millis=0, sub_version=0, subscription=subscription or "*",
        expression_type="TAG", bname=broker_name)
    resp = await _invoke(client, addr, request(RequestCode.PULL_MESSAGE, to_ext(header)),
                         timeout)
    status = PULL_STATUS.get(resp.code)
    if status is None:
        raise_for(resp, addr)
        raise BadResponseError(f"pull answered code {resp.code}", addr)
    try:
        answer = from_ext(PullMessageResponseHeader, resp.ext_fields)
    except ProtocolError as exc:
        raise BadResponseError(f"pull answer header does not decode: {exc}", addr) from None
    messages: list[MessageRecord] = []
    if status is PullStatus.FOUND:
        wanted = _tags_of(subscription)
        messages = [m for m in parse_records(resp.body, addr)
                    if wanted is None or (m.tags or "") in wanted]
    return PullResult(status, answer.next_begin_offset, answer.min_offset, answer.max_offset,
                      messages)


async def heartbeat(client: RemotingClient, addr: str, client_id: str, *,
                    consumer_group: str | None = None, topics: dict[str, str] | None = None,
                    producer_group: str | None = None, timeout: float = TIMEOUT) -> None:
    """HEART_BEAT: register a push consumer of `topics` (topic -> expression) and/or a
    producer with the broker at `addr`."""
    consumers: frozenset[ConsumerData] = frozenset()
    if consumer_group is not None:
        subs = frozenset(SubscriptionData.build(t, expr) for t, expr in (topics or {}).items())
        consumers = frozenset({ConsumerData(consumer_group, ConsumeType.CONSUME_PASSIVELY,
                                            subscription_data_set=subs)})
    producers = frozenset({ProducerData(producer_group)}) if producer_group else frozenset()
    data = HeartbeatData(client_id, producers, consumers)
    cmd = request(RequestCode.HEART_BEAT, None, fastjson.dumpb(to_json(data)))
    raise_for(await _invoke(client, addr, cmd, timeout), addr)


async def send_back(client: RemotingClient, addr: str, record: MessageRecord, group: str, *,
                    max_reconsume_times: int | None = None, timeout: float = TIMEOUT) -> None:
    """CONSUMER_SEND_MSG_BACK: consumption failed; the broker schedules a retry (or moves the
    message to the group's dead-letter queue once it was retried often enough)."""
    header = ConsumerSendMsgBackRequestHeader(
        offset=record.physical_offset, group=group, delay_level=0,
        origin_msg_id=record.msg_id, origin_topic=record.topic,
        max_reconsume_times=max_reconsume_times)
    cmd = request(RequestCode.CONSUMER_SEND_MSG_BACK, to_ext(header))
    raise_for(await _invoke(client, addr, cmd, timeout), addr)

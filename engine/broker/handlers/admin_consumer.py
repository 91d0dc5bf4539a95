"""Broker handlers: consumer/producer administration, offset reset, calls relayed to consumers.

How this works: consume stats, time spans and resets read the broker's offset table and the
store's queues; GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY are relayed on the named
consumer's own connection and its answer is returned as is (4.9.7 `callConsumer`); a reset is
applied to the offset table and announced to every online consumer with a oneway
RESET_CONSUMER_CLIENT_OFFSET.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

from engine.broker.clients import ClientChannel
from engine.broker.handlers.admin_topic import body
from engine.broker.state import BrokerState
from engine.broker.stats import GROUP_GET_NUMS
from engine.protocol import fastjson
from engine.protocol.body.admin import Connection as ConnectionData
from engine.protocol.body.admin import (
    ConsumeQueueData,
    ConsumerConnection,
    ConsumeStats,
    GetConsumerStatusBody,
    OffsetWrapper,
    ProducerConnection,
    ProducerInfo,
    ProducerTableInfo,
    QueryConsumeQueueResponseBody,
    QueryConsumeTimeSpanBody,
    QueryCorrectionOffsetBody,
    QueueTimeSpan,
    ResetOffsetBody,
)
from engine.protocol.body.decode import decode_body, request_name
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import LanguageCode, RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.errors import ProtocolError
from engine.protocol.header.broker import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryCorrectionOffsetHeader,
    ResetOffsetRequestHeader,
)
from engine.protocol.message import decode_offset_msg_id
from engine.protocol.version import V3_0_7_SNAPSHOT, version_desc
from engine.protocol.wire import from_ext, to_ext, to_json
from engine.remoting.errors import RemotingError, RemotingTimeoutError
from engine.remoting.router import RequestContext, Router
from engine.store.consume_queue import CQ_ENTRY, CQ_STORE_UNIT_SIZE

router = Router()
log = logging.getLogger("engine.broker")

Ctx = RequestContext[BrokerState]

LONG_MAX = 2**63 - 1
V3_1_8_SNAPSHOT = 62  # MQVersion ordinal: oldest client that answers broker-forwarded calls
CALL_CLIENT_TIMEOUT_S = 10.0  # Broker2Client.callClient
CONSUMER_STATUS_TIMEOUT_S = 5.0  # Broker2Client.getConsumeStatus, per client


def language_of(code: int) -> LanguageCode:
    try:
        return LanguageCode(code)
    except ValueError:
        return LanguageCode.OTHER


def connection_data(channel: ClientChannel) -> ConnectionData:
    return ConnectionData(channel.client_id, channel.client_addr or channel.conn.remote_addr,
                          language_of(channel.language), channel.version, channel.protocol)


def queues(state: BrokerState, topic: str, count: int) -> Iterator[MessageQueue]:
    name = state.config.broker_name
    return (MessageQueue(topic, name, q) for q in range(count))


# ---------------------------------------------------------------------------- consume stats


def consumed_topics(state: BrokerState, group: str,
                    topics: set[str]) -> Iterator[tuple[str, TopicConfig]]:
    """The topics of `topics` that exist and that the group, when online, subscribes."""
    online = state.consumers.subscription_count(group) > 0
    for topic in sorted(topics):
        config = state.topics.get(topic)
        if config is None:
            log.warning("consumeStats: topic %s does not exist", topic)
            continue
        if online and state.consumers.find_subscription(group, topic) is None:
            log.warning("consumeStats: the online group %s does not subscribe %s", group, topic)
            continue
        yield topic, config


def offset_wrapper(state: BrokerState, group: str, topic: str, queue_id: int) -> OffsetWrapper:
    store = state.store
    broker_offset = max(store.get_max_offset_in_queue(topic, queue_id), 0)
    consumer_offset, pull_offset = state.pop.progress(
        topic, group, queue_id, state.offsets.query(group, topic, queue_id))
    consumer_offset, pull_offset = max(consumer_offset, 0), max(pull_offset, 0)
    last = 0
    if consumer_offset > 0:
        last = max(store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1), 0)
    return OffsetWrapper(broker_offset, consumer_offset, last,
                         pull_offset if pull_offset != consumer_offset else None)


def topic_offsets(state: BrokerState, group: str, topic: str,
                  queue_count: int) -> dict[MessageQueue, OffsetWrapper]:
    return {mq: offset_wrapper(state, group, topic, mq.queue_id)
            for mq in queues(state, topic, queue_count)}


def group_tps(state: BrokerState, group: str, topic: str) -> float:
    """Messages a second the group pulled from the topic over the last minute."""
    return state.stats.tps(GROUP_GET_NUMS, f"{topic}@{group}", 60)


@router.handles(RequestCode.GET_CONSUME_STATS)
def get_consume_stats(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(GetConsumeStatsRequestHeader, cmd.ext_fields)
    st = ctx.state
    group = header.consumer_group
    topics = {header.topic} if header.topic and header.topic.strip() else (
        st.offsets.topics_of_group(group))
    table: dict[MessageQueue, OffsetWrapper] = {}
    tps = 0.0
    for topic, config in consumed_topics(st, group, topics):
        table.update(topic_offsets(st, group, topic, config.read_queue_nums))
        tps += group_tps(st, group, topic)
    return cmd.response(body=body(ConsumeStats(table, tps)))


# ---------------------------------------------------------------------------- connections


@router.handles(RequestCode.GET_CONSUMER_CONNECTION_LIST)
def get_consumer_connection_list(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    group = from_ext(GetConsumerConnectionListRequestHeader, cmd.ext_fields).consumer_group
    info = ctx.state.consumers.get(group)
    if info is None:
        return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE,
                            f"the consumer group[{group}] not online")
    data = ConsumerConnection(
        frozenset(connection_data(c) for c in info.channels.values()),
        dict(info.subscriptions), info.consume_type, info.message_model,
        info.consume_from_where)
    return cmd.response(body=body(data))


@router.handles(RequestCode.GET_PRODUCER_CONNECTION_LIST)
def get_producer_connection_list(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    group = from_ext(GetProducerConnectionListRequestHeader, cmd.ext_fields).producer_group
    if group not in ctx.state.producers.groups:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
    members = ctx.state.producers.members(group)
    return cmd.response(body=body(ProducerConnection(
        frozenset(connection_data(c) for c in members))))


@router.handles(RequestCode.GET_ALL_PRODUCER_INFO)
def get_all_producer_info(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    data = {
        group: [ProducerInfo(c.client_id, "/" + (c.client_addr or c.conn.remote_addr),
                             language_of(c.language),
                             c.version, c.last_update_ms) for c in members.values()]
        for group, members in ctx.state.producers.groups.items()
    }
    return cmd.response(body=body(ProducerTableInfo(data)))


# ---------------------------------------------------------------------------- time span


def format_time(ms: int) -> str:
    """`UtilAll.formatDate(new Date(ms), "yyyy-MM-dd#HH:mm:ss:SSS")` in local time."""
    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%d#%H:%M:%S", time.localtime(seconds)) + f":{millis:03d}"


def store_time(state: BrokerState, topic: str, queue_id: int, offset: int) -> int:
    """Store time of the message at a logical offset; -1 when there is none."""
    if offset < 0:
        return -1
    return state.store.get_message_store_timestamp(topic, queue_id, offset)


def time_span(state: BrokerState, group: str, mq: MessageQueue) -> QueueTimeSpan:
    topic, q = mq.topic, mq.queue_id
    store = state.store
    min_time = store.get_earliest_message_time(topic, q)
    max_offset = store.get_max_offset_in_queue(topic, q)
    max_time = store_time(state, topic, q, max_offset - 1)
    consumer_offset = state.offsets.query(group, topic, q)
    consume_time = (store_time(state, topic, q, consumer_offset - 1) if consumer_offset > 0
                    else min_time)
    delay = 0
    if consumer_offset < max_offset:
        delay = state.clock() - store_time(state, topic, q, consumer_offset)
    return QueueTimeSpan(mq, min_time, max_time, consume_time, delay, format_time(min_time),
                         format_time(max_time), format_time(consume_time))


@router.handles(RequestCode.QUERY_CONSUME_TIME_SPAN)
def query_consume_time_span(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(QueryConsumeTimeSpanRequestHeader, cmd.ext_fields)
    st = ctx.state
    config = st.topics.get(header.topic)
    if config is None:
        return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
    spans = [time_span(st, header.group, mq)
             for mq in queues(st, header.topic, config.write_queue_nums)]
    return cmd.response(body=body(QueryConsumeTimeSpanBody(spans)))


# ---------------------------------------------------------------------------- offset reset


def reset_offsets(state: BrokerState, header: ResetOffsetRequestHeader,
                  config: TopicConfig) -> dict[MessageQueue, int] | str:
    """Each queue's offset for the timestamp, or why the group cannot be reset.

    Unless forced, a queue only moves back: the new offset is the smaller of the committed
    one and the one found for the timestamp (-1: the max offset).
    """
    store = state.store
    table: dict[MessageQueue, int] = {}
    for mq in queues(state, header.topic, config.write_queue_nums):
        committed = state.offsets.query(header.group, header.topic, mq.queue_id)
        if committed == -1:
            return f"THe consumer group <{header.group}> not exist"
        if header.timestamp == -1:
            found = store.get_max_offset_in_queue(header.topic, mq.queue_id)
        else:
            found = store.get_offset_in_queue_by_time(header.topic, mq.queue_id,
                                                      header.timestamp)
        found = max(found, 0)
        table[mq] = found if header.is_force or found < committed else committed
    return table


def reset_request(header: ResetOffsetRequestHeader, table: dict[MessageQueue, int],
                  for_cpp: bool) -> RemotingCommand:
    """RESET_CONSUMER_CLIENT_OFFSET; C++ clients read the table as a list (ResetOffsetBodyForC)."""
    ext = to_ext(ResetOffsetRequestHeader(header.topic, header.group, header.timestamp))
    if for_cpp:
        data = fastjson.dumpb({"offsetTable": [
            {**to_json(mq), "offset": offset} for mq, offset in sorted(table.items())]})
    else:
        data = body(ResetOffsetBody(table))
    return request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, data, oneway=True)


@router.handles(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET)
def invoke_broker_to_reset_offset(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(ResetOffsetRequestHeader, cmd.ext_fields)
    log.info("[reset-offset] reset offset started by %s. topic=%s, group=%s, timestamp=%d, "
             "isForce=%s", ctx.connection.remote_addr, header.topic, header.group,
             header.timestamp, header.is_force)
    st = ctx.state
    config = st.topics.get(header.topic)
    if config is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "[reset-offset] reset offset failed, "
                            f"no topic in this broker. topic={header.topic}")
    table = reset_offsets(st, header, config)
    if isinstance(table, str):
        return cmd.response(ResponseCode.SYSTEM_ERROR, table)
    info = st.consumers.get(header.group)
    if info is None or not info.channels:
        return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE, (
            f"Consumer not online, so can not reset offset, Group: {header.group} "
            f"Topic: {header.topic} Timestamp: {header.timestamp}"))
    too_old = [c for c in info.channels.values() if c.version < V3_0_7_SNAPSHOT]
    if too_old:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "the client does not support this "
                            f"feature. version={version_desc(too_old[0].version)}")
    st.offsets.set_offsets(header.group, header.topic,
                           {mq.queue_id: offset for mq, offset in table.items()})
    notice = reset_request(header, table, cmd.language == LanguageCode.CPP)
    for channel in list(info.channels.values()):
        try:
            channel.conn.send_oneway(notice)
        except RemotingError as exc:
            log.warning("[reset-offset] telling %s failed: %s", channel.client_id, exc)
    return cmd.response(body=body(ResetOffsetBody(table)))


# ---------------------------------------------------------------------------- calls to clients


async def consumer_status(channel: ClientChannel,
                          call: RemotingCommand) -> dict[MessageQueue, int] | None:
    """One client's GET_CONSUMER_STATUS_FROM_CLIENT table, None when it did not answer."""
    try:
        answer = await channel.conn.invoke(call, CONSUMER_STATUS_TIMEOUT_S)
        if answer.code != ResponseCode.SUCCESS or not answer.body:
            return None
        status = decode_body(GetConsumerStatusBody, answer.body,
                             request_name(call.code), "answer")
        return status.message_queue_table
    except (RemotingError, ProtocolError) as exc:
        log.warning("[get-consumer-status] %s did not answer: %s", channel.client_id, exc)
        return None


@router.handles(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS)
async def invoke_broker_to_get_consumer_status(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(GetConsumerStatusRequestHeader, cmd.ext_fields)
    info = ctx.state.consumers.get(header.group)
    if info is None or not info.channels:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"No Any Consumer online in the consumer group: [{header.group}]")
    channels = list(info.channels.values())
    too_old = [c for c in channels if c.version < V3_0_7_SNAPSHOT]
    if too_old:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "the client does not support this "
                            f"feature. version={version_desc(too_old[0].version)}")
    if header.client_addr and header.client_addr.strip():
        channels = [c for c in channels if c.client_id == header.client_addr][:1]
    call = request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
                   to_ext(GetConsumerStatusRequestHeader(header.topic, header.group)))
    answers = await asyncio.gather(*(consumer_status(c, call) for c in channels))
    table = {c.client_id: a for c, a in zip(channels, answers, strict=True) if a is not None}
    return cmd.response(body=body(GetConsumerStatusBody(consumer_table=table)))


async def call_consumer(ctx: Ctx, cmd: RemotingCommand, group: str, client_id: str | None,
                        data: bytes | None, ext: dict[str, str]) -> RemotingCommand:
    """Forward a request to one consumer's connection and relay its answer (`callConsumer`)."""
    channel = ctx.state.consumers.find_channel(group, client_id) if client_id else None
    if channel is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"The Consumer <{group}> <{client_id}> not online")
    if channel.version < V3_1_8_SNAPSHOT:
        return cmd.response(ResponseCode.SYSTEM_ERROR, (
            f"The Consumer <{client_id}> Version <{version_desc(channel.version)}> too low to "
            "finish, please upgrade it to V3_1_8_SNAPSHOT"))
    try:
        answer = await channel.conn.invoke(request(cmd.code, ext, data), CALL_CLIENT_TIMEOUT_S)
    except RemotingTimeoutError as exc:
        return cmd.response(ResponseCode.CONSUME_MSG_TIMEOUT,
                            f"consumer <{group}> <{client_id}> Timeout: {exc}")
    except RemotingError as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
    return cmd.response(answer.code, answer.remark, answer.ext_fields, answer.body)


@router.handles(RequestCode.GET_CONSUMER_RUNNING_INFO)
async def get_consumer_running_info(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(GetConsumerRunningInfoRequestHeader, cmd.ext_fields)
    return await call_consumer(ctx, cmd, header.consumer_group, header.client_id, cmd.body,
                               dict(cmd.ext_fields or {}))


@router.handles(RequestCode.CONSUME_MESSAGE_DIRECTLY)
async def consume_message_directly(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(ConsumeMessageDirectlyResultRequestHeader, cmd.ext_fields)
    if not header.msg_id:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "CONSUME_MESSAGE_DIRECTLY needs msgId, "
                            "the offset message id of the message to consume")
    try:
        _, offset = decode_offset_msg_id(header.msg_id)
    except ProtocolError as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"{exc}; pass the offset message id")
    record = ctx.state.store.look_message_by_offset(offset)
    if record is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"no message at commit-log offset "
                            f"{offset} (msgId {header.msg_id}) in this broker")
    ext = dict(cmd.ext_fields or {})
    ext["brokerName"] = ctx.state.config.broker_name
    return await call_consumer(ctx, cmd, header.consumer_group, header.client_id, record, ext)


# ---------------------------------------------------------------------------- offsets, queues


def min_offsets_of_all_groups(state: BrokerState, topic: str,
                              excluded: set[str]) -> dict[int, int]:
    """Per queue, the smallest committed offset still in the queue among the groups."""
    result: dict[int, int] = {}
    for t, group, offsets in state.offsets.entries():
        if t != topic or group in excluded:
            continue
        for queue_id, offset in offsets.items():
            if offset >= state.store.get_min_offset_in_queue(topic, queue_id):
                result[queue_id] = min(offset, result.get(queue_id, LONG_MAX))
    return result


@router.handles(RequestCode.QUERY_CORRECTION_OFFSET)
def query_correction_offset(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(QueryCorrectionOffsetHeader, cmd.ext_fields)
    st = ctx.state
    excluded = {g.strip() for g in (header.filter_groups or "").split(",") if g.strip()}
    correction = min_offsets_of_all_groups(st, header.topic, excluded)
    for queue_id, offset in st.offsets.queue_offsets(header.compare_group, header.topic).items():
        current = correction.get(queue_id)
        if current is not None and current > offset:
            correction[queue_id] = LONG_MAX
    return cmd.response(body=body(QueryCorrectionOffsetBody(correction)))


def consume_queue_entries(data: bytes, count: int) -> list[ConsumeQueueData]:
    entries = data[: max(count, 0) * CQ_STORE_UNIT_SIZE]
    return [ConsumeQueueData(offset, size, tags) for offset, size, tags in
            CQ_ENTRY.iter_unpack(entries[: len(entries) - len(entries) % CQ_STORE_UNIT_SIZE])]


@router.handles(RequestCode.QUERY_CONSUME_QUEUE)
def query_consume_queue(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(QueryConsumeQueueRequestHeader, cmd.ext_fields)
    st = ctx.state
    topic, queue_id = header.topic or "", header.queue_id
    cq = st.store.queues.find(topic, queue_id)
    if cq is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
    sub, filter_data = None, None
    if header.consumer_group is not None:
        sub = st.consumers.find_subscription(header.consumer_group, topic)
        filter_data = (f"{header.consumer_group}@{topic} is not online!" if sub is None
                       else "null")  # TAG subscriptions have no ConsumerFilterData
    low, high = cq.min_offset, cq.max_offset
    remark = None
    entries: list[ConsumeQueueData] = []
    if low <= header.index < high:
        entries = consume_queue_entries(
            cq.read_entries(header.index, header.count * CQ_STORE_UNIT_SIZE), header.count)
    else:
        remark = f"Index {header.index} of {queue_id}@{topic} is not exist!"
    data = QueryConsumeQueueResponseBody(sub, filter_data, entries, high, low)
    return cmd.response(remark=remark, body=body(data))

"""Requests brokers send to a client, routed to its producers and consumers.

How this works: the client instance's `RemotingClient` dispatches these through `router`
with the instance as state.  NOTIFY_CONSUMER_IDS_CHANGED wakes the rebalance Service;
CHECK_TRANSACTION_STATE goes to the producer of the half message's group (its answer is an
END_TRANSACTION on the same connection); RESET_CONSUMER_CLIENT_OFFSET restarts a consumer's
queues from the broker's table; GET_CONSUMER_RUNNING_INFO, GET_CONSUMER_STATUS_FROM_CLIENT
and CONSUME_MESSAGE_DIRECTLY are answered from the named consumer.  Unknown groups are
answered (when an answer is due) with SYSTEM_ERROR, as Java's `ClientRemotingProcessor`.
"""

from __future__ import annotations

import logging
from typing import TypeAlias

from engine.client.core.members import Members
from engine.protocol import fastjson
from engine.protocol.body.admin import GetConsumerStatusBody, ResetOffsetBody
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.errors import ProtocolError
from engine.protocol.message import PROPERTY_PRODUCER_GROUP, decode_record, string_to_properties
from engine.protocol.wire import from_json, to_json
from engine.remoting.router import RequestContext, Router

log = logging.getLogger(__name__)

router = Router()

Ctx: TypeAlias = "RequestContext[Members]"


@router.handles(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
def notify_consumer_ids_changed(ctx: Ctx, cmd: RemotingCommand) -> None:
    log.info("consumers of group %s changed (told by %s): rebalancing",
             cmd.ext("consumerGroup"), ctx.connection.remote_addr)
    ctx.state.rebalance_now()


@router.handles(RequestCode.CHECK_TRANSACTION_STATE)
async def check_transaction_state(ctx: Ctx, cmd: RemotingCommand) -> None:
    try:
        record = decode_record(cmd.body or b"")
    except ProtocolError as exc:
        log.warning("CHECK_TRANSACTION_STATE from %s with a bad message: %s",
                    ctx.connection.remote_addr, exc)
        return
    group = string_to_properties(record.properties_raw.decode()).get(PROPERTY_PRODUCER_GROUP)
    producer = ctx.state.producers.get(group or "")
    if producer is None:
        log.warning("CHECK_TRANSACTION_STATE for producer group %s, which is not here", group)
        return
    await producer.check_transaction_state(ctx.connection, cmd)


@router.handles(RequestCode.RESET_CONSUMER_CLIENT_OFFSET)
async def reset_consumer_client_offset(ctx: Ctx, cmd: RemotingCommand) -> None:
    group, topic = cmd.ext("group") or "", cmd.ext("topic") or ""
    consumer = ctx.state.consumers.get(group)
    if consumer is None:
        log.warning("offset reset for group %s, which is not here", group)
        return
    try:
        body = from_json(ResetOffsetBody, fastjson.loads(cmd.body or b"{}"))
    except ProtocolError as exc:
        log.warning("offset reset for %s with a bad body: %s", group, exc)
        return
    table = {mq: offset for mq, offset in body.offset_table.items() if mq.topic == topic}
    await consumer.reset_offsets(topic, table)


@router.handles(RequestCode.GET_CONSUMER_RUNNING_INFO)
def get_consumer_running_info(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    group = cmd.ext("consumerGroup") or ""
    consumer = ctx.state.consumers.get(group)
    if consumer is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"The Consumer Group <{group}> not exist in this consumer")
    return cmd.response(body=fastjson.dumpb(to_json(consumer.running_info())))


@router.handles(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT)
def get_consumer_status(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    group, topic = cmd.ext("group") or "", cmd.ext("topic") or ""
    consumer = ctx.state.consumers.get(group)
    if consumer is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"The Consumer Group <{group}> not exist in this consumer")
    info = consumer.running_info()
    table = {mq: pq.commit_offset for mq, pq in info.mq_table.items() if mq.topic == topic}
    return cmd.response(body=fastjson.dumpb(to_json(GetConsumerStatusBody(table))))


@router.handles(RequestCode.CONSUME_MESSAGE_DIRECTLY)
async def consume_message_directly(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    group = cmd.ext("consumerGroup") or ""
    consumer = ctx.state.consumers.get(group)
    if consumer is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"The Consumer Group <{group}> not exist in this consumer")
    result = await consumer.consume_directly(cmd.body or b"", cmd.ext("brokerName"))
    return cmd.response(body=fastjson.dumpb(to_json(result)))

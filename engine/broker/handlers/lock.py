"""Orderly consumption: LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42)."""

from __future__ import annotations

from engine.broker.state import BrokerState
from engine.protocol import fastjson
from engine.protocol.body.decode import request_body
from engine.protocol.body.lock import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from engine.protocol.codes import RequestCode
from engine.protocol.command import RemotingCommand
from engine.protocol.wire import to_json
from engine.remoting.router import RequestContext, Router

router = Router()

Ctx = RequestContext[BrokerState]


@router.handles(RequestCode.LOCK_BATCH_MQ)
def lock_batch_mq(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    body = request_body(cmd, LockBatchRequestBody)
    granted = ctx.state.locks.try_lock_batch(body.consumer_group, body.mq_set, body.client_id)
    answer = LockBatchResponseBody(frozenset(granted))
    return cmd.response(body=fastjson.dumpb(to_json(answer)))


@router.handles(RequestCode.UNLOCK_BATCH_MQ)
def unlock_batch_mq(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    body = request_body(cmd, UnlockBatchRequestBody)
    ctx.state.locks.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
    return cmd.response()

"""Broker handlers: the store's manual maintenance (expired files, expired and unused queues).

How this works: DELETE_EXPIRED_COMMITLOG, as in 4.9.7, only arms the cleanup service's manual
mode: its next 20 rounds (one every cleanResourceInterval) delete expired commit-log segments
whatever the deleteWhen hour, and the answer does not wait for them.  The two queue cleanups
change the store's queue table, which the store allows only from the event loop's thread, so
they run inline; they unlink the files of the removed queues only.
"""

from __future__ import annotations

import logging

from engine.broker.handlers.admin_topic import remove_unused_queues
from engine.broker.state import BrokerState
from engine.protocol.codes import RequestCode
from engine.protocol.command import RemotingCommand
from engine.remoting.router import RequestContext, Router

router = Router()
log = logging.getLogger("engine.broker")

Ctx = RequestContext[BrokerState]


@router.handles(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
def clean_expired_consume_queue(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    log.warning("invoke cleanExpiredConsumeQueue start (by %s)", ctx.connection.remote_addr)
    removed = ctx.state.store.clean_expired_consume_queues()
    log.warning("invoke cleanExpiredConsumeQueue end: %d queue(s) removed %s", len(removed),
                removed)
    return cmd.response()


@router.handles(RequestCode.CLEAN_UNUSED_TOPIC)
def clean_unused_topic(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    log.warning("invoke cleanUnusedTopic start (by %s)", ctx.connection.remote_addr)
    removed = remove_unused_queues(ctx.state)
    log.warning("invoke cleanUnusedTopic end: %d queue(s) removed", len(removed))
    return cmd.response()


@router.handles(RequestCode.DELETE_EXPIRED_COMMITLOG)
def delete_expired_commit_log(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    log.warning("invoke deleteExpiredCommitLog (by %s)", ctx.connection.remote_addr)
    ctx.state.store.cleanup.request_manual_delete()
    return cmd.response()

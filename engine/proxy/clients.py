"""The client-facing RPCs: Telemetry, Heartbeat, NotifyClientTermination, routes, assignments.

How this works (5.3 `ClientActivity`, `RouteActivity`): Telemetry is the client's
long-lived bidirectional stream.  Its first command is the client's settings; the proxy
validates them, registers the client with the brokers (`ClientSession.register`) and answers
the merged settings (`settings.merged`), which every 5.x client waits for before it starts.
The stream then carries the proxy's commands to the client (orphaned transaction checks,
`sessions.py`; thread stack and message verification requests, `relay.py`) and the client's
answers to the latter, until either side closes it; the requests still waiting for an answer
on a stream that ends are answered at once.  A failure while handling a command ends the
stream with INVALID_ARGUMENT for a 4xxxx code and INTERNAL otherwise, as 5.3 does.
Heartbeat renews the registration; NotifyClientTermination removes it at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import grpc

from engine.proxy import relay
from engine.proxy.caller import CallContext
from engine.proxy.client_settings import merged
from engine.proxy.core import ProxyCore
from engine.proxy.handlers import UndecodableRequest, refuse
from engine.proxy.route import assignments, message_queues
from engine.proxy.sessions import ClientSession, OutboxItem
from engine.proxy.status import OK_STATUS, ProxyError, status
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.validate import validate_group as validate_group
from engine.proxy.validate import validate_topic as validate_topic

log = logging.getLogger("engine.proxy")

async def register(core: ProxyCore, session: ClientSession) -> None:
    await session.register(await core.gateway.masters(session.topics))


# ---------------------------------------------------------------------- Telemetry

async def _settings(core: ProxyCore, ctx: CallContext, command: spb.TelemetryCommand,
                    outbox: asyncio.Queue[OutboxItem]
                    ) -> ClientSession:
    settings = command.settings
    if core.auth is not None:
        core.auth.check(ctx, settings)
    if settings.HasField("publishing"):
        for topic in settings.publishing.topics:
            validate_topic(topic)
    elif settings.HasField("subscription"):
        validate_group(settings.subscription.group)
    else:
        raise ProxyError(pb.BAD_REQUEST, "there is no publishing or subscription data in settings")
    session = core.sessions.open(ctx)
    if settings.HasField("subscription"):
        group = await core.gateway.group_settings(
            settings.subscription.group.name,
            [e.topic.name for e in settings.subscription.subscriptions])
        session.settings = merged(settings, core.config, fifo=group.fifo,
                                  retry_max_times=group.retry_max_times)
    else:
        session.settings = merged(settings, core.config)
    session.adopt_user_agent(settings.user_agent)
    session.outbox = outbox
    await register(core, session)
    return session


async def telemetry(core: ProxyCore, requests: AsyncIterator[spb.TelemetryCommand],
                    context: grpc.aio.ServicerContext[object, object]
                    ) -> AsyncIterator[spb.TelemetryCommand]:
    ctx = core.context(context)
    outbox: asyncio.Queue[OutboxItem] = asyncio.Queue()
    sessions: list[ClientSession] = []

    async def read() -> None:
        try:
            async for command in requests:
                kind = command.WhichOneof("command")
                if kind == "settings":
                    session = await _settings(core, ctx, command, outbox)
                    sessions.append(session)
                    outbox.put_nowait(spb.TelemetryCommand(status=OK_STATUS,
                                                           settings=session.settings))
                elif sessions:
                    session = sessions[-1]
                    session.touch()
                    if not relay.answer(session, command) and kind is not None:
                        log.debug("telemetry %s of %s answers nothing waiting", kind,
                                  ctx.client_id)
            outbox.put_nowait(None)
        except Exception as exc:  # handed to the writer, which ends the stream with it
            outbox.put_nowait(exc)

    reader = asyncio.create_task(read())
    try:
        while True:
            item = await outbox.get()
            if item is None:
                return
            if isinstance(item, UndecodableRequest):
                await refuse(context)  # as grpc-java ends it
            if isinstance(item, BaseException):
                code = item.code if isinstance(item, ProxyError) else pb.INTERNAL_SERVER_ERROR
                grpc_code = (grpc.StatusCode.INVALID_ARGUMENT if 40000 <= code < 50000
                             else grpc.StatusCode.INTERNAL)
                if grpc_code is grpc.StatusCode.INTERNAL:
                    log.warning("telemetry of %s failed: %r", ctx.client_id, item)
                await context.abort(grpc_code, f"process client telemetryCommand failed. {item}")
            yield item  # type: ignore[misc]
    finally:
        reader.cancel()
        for session in sessions:
            if session.outbox is outbox:
                session.outbox = None
            session.pending.stream_closed(outbox)


# ---------------------------------------------------------------------- unary client calls

async def heartbeat(core: ProxyCore, session: ClientSession,
                    request: spb.HeartbeatRequest) -> spb.HeartbeatResponse:
    if session.settings is None:
        return spb.HeartbeatResponse(status=status(
            pb.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client"))
    if session.group is not None:
        validate_group(request.group)
    await register(core, session)
    return spb.HeartbeatResponse(status=OK_STATUS)


async def notify_termination(core: ProxyCore, session: ClientSession,
                             request: spb.NotifyClientTerminationRequest
                             ) -> spb.NotifyClientTerminationResponse:
    if session.settings is None:
        core.sessions.remove(session.client_id)
        await session.unregister()
        return spb.NotifyClientTerminationResponse(status=status(
            pb.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client"))
    core.sessions.remove(session.client_id)
    await session.unregister()
    return spb.NotifyClientTerminationResponse(status=OK_STATUS)


async def query_route(core: ProxyCore, request: spb.QueryRouteRequest) -> spb.QueryRouteResponse:
    topic = validate_topic(request.topic)
    route = await core.gateway.route(topic)
    kind = await core.gateway.topic_message_type(topic)
    queues = message_queues(topic, route, core.endpoints(request.endpoints), kind)
    return spb.QueryRouteResponse(status=OK_STATUS, message_queues=queues)


async def query_assignment(core: ProxyCore, session: ClientSession,
                           request: spb.QueryAssignmentRequest) -> spb.QueryAssignmentResponse:
    topic = validate_topic(request.topic)
    validate_group(request.group)
    route = await core.gateway.route(topic)
    fifo = bool(session.settings is not None and session.settings.subscription.fifo)
    found = assignments(topic, route, core.endpoints(request.endpoints), fifo=fifo)
    if not found:
        return spb.QueryAssignmentResponse(status=status(pb.FORBIDDEN, "no readable queue"))
    return spb.QueryAssignmentResponse(status=OK_STATUS, assignments=found)

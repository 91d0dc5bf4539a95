"""`MessagingService`: the gRPC methods of apache.rocketmq.v2.MessagingService, as thin adapters.

How this works: each method enters the call (`ProxyCore.enter`: headers, signature, rules,
session), hands it to the module of its family (`clients`, `producer`, `consume`; SendMessage to
`lean_send`, which serves the common case leanly and hands the rest to `producer`) and answers
a `ProxyError` as the response's `Status`, as 5.3's `GrpcMessagingApplication` does; any
other exception is INTERNAL_SERVER_ERROR saying only that (its traceback goes to the log).
The methods 5.3 leaves to the generated base class (PullMessage, UpdateOffset, GetOffset,
QueryOffset) answer the gRPC status UNIMPLEMENTED as there.  Nothing waits without a
deadline.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeAlias, TypeVar

import grpc

from engine.proxy import clients, consume, lean_send, producer
from engine.proxy.core import ProxyCore
from engine.proxy.status import ProxyError, status
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb

log = logging.getLogger("engine.proxy")

R = TypeVar("R")
#: The answer to a failure nobody foresaw: the proxy's log has its traceback (the client is
#: told nothing of the implementation).
INTERNAL_ERROR = "internal error of the proxy; its log has the details"
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


async def _answer(make: Callable[[pb.Status], R], work: Callable[[], Awaitable[R]]) -> R:
    try:
        return await work()
    except ProxyError as exc:
        return make(status(exc.code, exc.message))
    except Exception:
        log.exception("internal error")
        return make(status(pb.INTERNAL_SERVER_ERROR, INTERNAL_ERROR))


class MessagingService:
    """The servicer `service_pb2_grpc.add_MessagingServiceServicer_to_server` registers."""

    def __init__(self, core: ProxyCore) -> None:
        self.core = core

    async def QueryRoute(self, request: spb.QueryRouteRequest,
                         context: Context) -> spb.QueryRouteResponse:
        async def work() -> spb.QueryRouteResponse:
            self.core.enter(context, request)
            return await clients.query_route(self.core, request)
        return await _answer(lambda s: spb.QueryRouteResponse(status=s), work)

    async def Heartbeat(self, request: spb.HeartbeatRequest,
                        context: Context) -> spb.HeartbeatResponse:
        async def work() -> spb.HeartbeatResponse:
            _, session = self.core.enter(context, request)
            return await clients.heartbeat(self.core, session, request)
        return await _answer(lambda s: spb.HeartbeatResponse(status=s), work)

    async def SendMessage(self, request: spb.SendMessageRequest,
                          context: Context) -> spb.SendMessageResponse:
        # `_answer` written out: the most frequent call saves a closure and a coroutine.
        try:
            ctx, _ = self.core.enter(context, request)
            return await lean_send.send_message(self.core, ctx, request)
        except ProxyError as exc:
            return spb.SendMessageResponse(status=status(exc.code, exc.message))
        except Exception:
            log.exception("internal error")
            return spb.SendMessageResponse(status=status(pb.INTERNAL_SERVER_ERROR,
                                                         INTERNAL_ERROR))

    async def QueryAssignment(self, request: spb.QueryAssignmentRequest,
                              context: Context) -> spb.QueryAssignmentResponse:
        async def work() -> spb.QueryAssignmentResponse:
            _, session = self.core.enter(context, request)
            return await clients.query_assignment(self.core, session, request)
        return await _answer(lambda s: spb.QueryAssignmentResponse(status=s), work)

    async def ReceiveMessage(self, request: spb.ReceiveMessageRequest,
                             context: Context) -> AsyncIterator[spb.ReceiveMessageResponse]:
        try:
            ctx, session = self.core.enter(context, request)
            async for response in consume.receive(self.core, ctx, session, request, context):
                yield response
        except ProxyError as exc:
            yield spb.ReceiveMessageResponse(status=status(exc.code, exc.message))
        except Exception:
            log.exception("internal error in ReceiveMessage")
            yield spb.ReceiveMessageResponse(status=status(pb.INTERNAL_SERVER_ERROR,
                                                           INTERNAL_ERROR))
        # 5.3 ends every receive with the proxy's clock (clients measure delivery latency).
        done = spb.ReceiveMessageResponse()
        done.delivery_timestamp.FromMilliseconds(int(time.time() * 1000))
        yield done

    async def AckMessage(self, request: spb.AckMessageRequest,
                         context: Context) -> spb.AckMessageResponse:
        async def work() -> spb.AckMessageResponse:
            self.core.enter(context, request)
            return await consume.ack(self.core, request)
        return await _answer(lambda s: spb.AckMessageResponse(status=s), work)

    async def ForwardMessageToDeadLetterQueue(
            self, request: spb.ForwardMessageToDeadLetterQueueRequest,
            context: Context) -> spb.ForwardMessageToDeadLetterQueueResponse:
        async def work() -> spb.ForwardMessageToDeadLetterQueueResponse:
            self.core.enter(context, request)
            return await consume.forward_to_dlq(self.core, request)
        return await _answer(lambda s: spb.ForwardMessageToDeadLetterQueueResponse(status=s),
                             work)

    async def ChangeInvisibleDuration(self, request: spb.ChangeInvisibleDurationRequest,
                                      context: Context) -> spb.ChangeInvisibleDurationResponse:
        async def work() -> spb.ChangeInvisibleDurationResponse:
            self.core.enter(context, request)
            return await consume.change_invisible(self.core, request)
        return await _answer(lambda s: spb.ChangeInvisibleDurationResponse(status=s), work)

    async def EndTransaction(self, request: spb.EndTransactionRequest,
                             context: Context) -> spb.EndTransactionResponse:
        async def work() -> spb.EndTransactionResponse:
            ctx, _ = self.core.enter(context, request)
            return await producer.end_transaction(self.core, ctx, request)
        return await _answer(lambda s: spb.EndTransactionResponse(status=s), work)

    async def NotifyClientTermination(self, request: spb.NotifyClientTerminationRequest,
                                      context: Context) -> spb.NotifyClientTerminationResponse:
        async def work() -> spb.NotifyClientTerminationResponse:
            _, session = self.core.enter(context, request)
            return await clients.notify_termination(self.core, session, request)
        return await _answer(lambda s: spb.NotifyClientTerminationResponse(status=s), work)

    async def Telemetry(self, request_iterator: AsyncIterator[spb.TelemetryCommand],
                        context: Context) -> AsyncIterator[spb.TelemetryCommand]:
        async for command in clients.telemetry(self.core, request_iterator, context):
            yield command

    async def RecallMessage(self, request: spb.RecallMessageRequest,
                            context: Context) -> spb.RecallMessageResponse:
        async def work() -> spb.RecallMessageResponse:
            ctx, _ = self.core.enter(context, request)
            return await producer.recall_message(self.core, ctx, request)
        return await _answer(lambda s: spb.RecallMessageResponse(status=s), work)

    # 5.3 leaves these to the generated base class: gRPC status UNIMPLEMENTED.
    async def _unimplemented(self, name: str, context: Context) -> NoReturn:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"Method not implemented: {name}")
        raise AssertionError("abort() returns only by raising")

    async def PullMessage(self, request: object, context: Context) -> AsyncIterator[object]:
        await self._unimplemented("PullMessage", context)
        yield  # pragma: no cover (abort raises)

    async def UpdateOffset(self, request: object, context: Context) -> object:
        await self._unimplemented("UpdateOffset", context)

    async def GetOffset(self, request: object, context: Context) -> object:
        await self._unimplemented("GetOffset", context)

    async def QueryOffset(self, request: object, context: Context) -> object:
        await self._unimplemented("QueryOffset", context)

"""The gRPC method handlers of `MessagingService`: requests that do not parse answered as
grpc-java answers them.

How this works: grpcio's generated registration parses each request with the message's
`FromString`; a request that does not parse then fails the call with UNKNOWN and a text
naming Python's `DecodeError`.  Apache's proxy is grpc-java, which answers such a call
UNKNOWN with no description at all (checked against 5.3.3, every RPC, Telemetry too).  So
the handlers are registered here from the service's descriptor: each request is parsed by a
function that returns `UNDECODABLE` instead of raising, and each method first answers that
with UNKNOWN and nothing more; a stream of requests (Telemetry) raises `UndecodableRequest`
where one does not parse, which ends the call the same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import grpc
from google.protobuf.message import DecodeError, Message

from engine.proxy.v2 import service_pb2 as spb

SERVICE = "apache.rocketmq.v2.MessagingService"


class UndecodableRequest(Exception):
    """A request of a stream that does not parse (the call ends UNKNOWN, no description)."""


class _Undecodable:
    __slots__ = ()


#: What a request that does not parse is handed to its method as.
UNDECODABLE: Any = _Undecodable()

Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


async def refuse(context: Context) -> None:
    """End the call as grpc-java ends one whose request does not parse."""
    await context.abort(grpc.StatusCode.UNKNOWN, "")


def _parser(message: type[Message]) -> Callable[[bytes], Any]:
    parse = message.FromString

    def parsed(data: bytes) -> Any:
        try:
            return parse(data)
        except DecodeError:
            return UNDECODABLE
    return parsed


def _unary_unary(behavior: Callable[..., Any]) -> Callable[..., Any]:
    async def handle(request: Any, context: Context) -> Any:
        if request is UNDECODABLE:
            await refuse(context)
        return await behavior(request, context)
    return handle


def _unary_stream(behavior: Callable[..., AsyncIterator[Any]]) -> Callable[..., Any]:
    async def handle(request: Any, context: Context) -> AsyncIterator[Any]:
        if request is UNDECODABLE:
            await refuse(context)
        async for response in behavior(request, context):
            yield response
    return handle


async def _requests(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for request in requests:
        if request is UNDECODABLE:
            raise UndecodableRequest("a request of the stream does not parse")
        yield request


def _stream_stream(behavior: Callable[..., AsyncIterator[Any]]) -> Callable[..., Any]:
    async def handle(requests: AsyncIterator[Any], context: Context) -> AsyncIterator[Any]:
        async for response in behavior(_requests(requests), context):
            yield response
    return handle


@dataclass(frozen=True, slots=True)
class Method:
    """One method of the service, wrapped as every front serves it (grpcio's, h2/)."""

    name: str
    handler: Callable[..., Any]
    parse: Callable[[bytes], Any]
    serialize: Callable[[Any], bytes]
    client_streaming: bool
    server_streaming: bool


def methods(servicer: object) -> dict[str, Method]:
    """Every method of the service `servicer` implements (by the method's name), its
    requests parsed as grpc-java parses them."""
    table: dict[str, Method] = {}
    for method in spb.DESCRIPTOR.services_by_name["MessagingService"].methods:
        behavior = getattr(servicer, method.name)
        streams = (method.client_streaming, method.server_streaming)
        if streams == (False, False):
            handler = _unary_unary(behavior)
        elif streams == (False, True):
            handler = _unary_stream(behavior)
        elif streams == (True, True):
            handler = _stream_stream(behavior)
        else:  # the service has no client-streaming-only method
            handler = behavior
        table[method.name] = Method(
            method.name, handler, _parser(getattr(spb, method.input_type.name)),
            getattr(spb, method.output_type.name).SerializeToString, *streams)
    return table


def add_to_server(servicer: object, server: grpc.aio.Server) -> None:
    """Register every method of the service `servicer` implements with grpcio's server."""
    kinds = {(False, False): grpc.unary_unary_rpc_method_handler,
             (False, True): grpc.unary_stream_rpc_method_handler,
             (True, True): grpc.stream_stream_rpc_method_handler,
             (True, False): grpc.stream_unary_rpc_method_handler}
    handlers: dict[str, grpc.RpcMethodHandler] = {
        name: kinds[m.client_streaming, m.server_streaming](m.handler, m.parse, m.serialize)
        for name, m in methods(servicer).items()}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_registered_method_handlers(SERVICE, handlers)

"""Connections that break HTTP/2 (a CONTINUATION flood, HEADERS on an even stream id, a
flow-control window overflow, a WINDOW_UPDATE of 0) to the proxy's gRPC server: grpcio's
closes each, refuses its stream or ignores the frame, never with a GOAWAY; ours answers each
as Apache 5.3.3's Netty does, with a GOAWAY carrying the error code, and closes it
(docs/proxy.md "What differs"); and a client beside them is served as before."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import pytest

from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from tests.proxy.conftest import FRONT, Stack
from tests.proxy.h2frames import (
    CASES,
    FLOW_CONTROL_ERROR,
    HEADERS,
    PING,
    PROTOCOL_ERROR,
    RST_STREAM,
    Answer,
    answer_to,
)
from tests.proxy.test_receive_rules import headers


def _closed(answer: Answer) -> bool:
    return answer.closed and PING not in answer.kinds[2:]  # no PING ACK after the preface's


def _refused(answer: Answer) -> bool:
    return RST_STREAM in answer.kinds and not answer.closed


def _ignored(answer: Answer) -> bool:  # the PING answered, no response on the bad stream
    return PING in answer.kinds and HEADERS not in answer.kinds and not answer.closed


def _goaway(code: int) -> Callable[[Answer], bool]:
    def closed_with(answer: Answer) -> bool:
        return answer.goaway_error == code and answer.closed
    return closed_with


#: What grpcio does with each (checked against grpcio 1.85).
GRPCIO = {
    "CONTINUATION flood, then a PING inside the header block": _closed,
    "CONTINUATION flood, ended": _refused,
    "HEADERS on stream 2": _ignored,
    "connection window overflow": _ignored,
    "WINDOW_UPDATE of 0": _closed,
}
#: What our front does: as 5.3.3 (Netty), a GOAWAY with the error code, then the connection
#: closed (docs/proxy.md, "What differs").
OURS = {
    "CONTINUATION flood, then a PING inside the header block": _goaway(PROTOCOL_ERROR),
    "CONTINUATION flood, ended": _goaway(PROTOCOL_ERROR),
    "HEADERS on stream 2": _goaway(PROTOCOL_ERROR),
    "connection window overflow": _goaway(FLOW_CONTROL_ERROR),
    "WINDOW_UPDATE of 0": _goaway(PROTOCOL_ERROR),
}
EXPECTED = GRPCIO if FRONT == "grpcio" else OURS


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_protocol_error_harms_no_other_client(stack: Stack, case: str) -> None:
    await stack.create_topic("H2Errors")
    host, port = stack.endpoint.rsplit(":", 1)
    async with grpc.aio.insecure_channel(stack.endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        route = spb.QueryRouteRequest(topic=pb.Resource(name="H2Errors"))
        before = await stub.QueryRoute(route, metadata=headers(), timeout=10)
        answer = await answer_to(host, int(port), CASES[case], wait_s=3)
        assert EXPECTED[case](answer), answer
        after = await stub.QueryRoute(route, metadata=headers(), timeout=10)
        assert before.status.code == after.status.code == pb.OK

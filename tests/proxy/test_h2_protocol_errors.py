"""Connections that break HTTP/2 (a CONTINUATION flood, HEADERS on an even stream id, a
flow-control window overflow, a WINDOW_UPDATE of 0) to the proxy's gRPC server (grpcio): each
is closed, its stream refused, or the frame ignored, never with a GOAWAY (Apache 5.3.3's Netty
sends one with the error code; docs/proxy.md "What differs"), and a client beside them is
served as before."""

from __future__ import annotations

import grpc
import pytest

from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from tests.proxy.conftest import Stack
from tests.proxy.h2frames import CASES, HEADERS, PING, RST_STREAM, Answer, answer_to
from tests.proxy.test_receive_rules import headers


def _closed(answer: Answer) -> bool:
    return answer.closed and PING not in answer.kinds[2:]  # no PING ACK after the preface's


def _refused(answer: Answer) -> bool:
    return RST_STREAM in answer.kinds and not answer.closed


def _ignored(answer: Answer) -> bool:  # the PING answered, no response on the bad stream
    return PING in answer.kinds and HEADERS not in answer.kinds and not answer.closed


#: What grpcio does with each (checked against grpcio 1.85).
EXPECTED = {
    "CONTINUATION flood, then a PING inside the header block": _closed,
    "CONTINUATION flood, ended": _refused,
    "HEADERS on stream 2": _ignored,
    "connection window overflow": _ignored,
    "WINDOW_UPDATE of 0": _closed,
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_protocol_error_harms_no_other_client(stack: Stack, case: str) -> None:
    await stack.create_topic("H2Errors")
    host, port = stack.endpoint.rsplit(":", 1)
    async with grpc.aio.insecure_channel(stack.endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        route = spb.QueryRouteRequest(topic=pb.Resource(name="H2Errors"))
        before = await stub.QueryRoute(route, metadata=headers(), timeout=10)
        answer = await answer_to(host, int(port), CASES[case], wait_s=3)
        assert answer.goaway_error is None
        assert EXPECTED[case](answer), answer
        after = await stub.QueryRoute(route, metadata=headers(), timeout=10)
        assert before.status.code == after.status.code == pb.OK

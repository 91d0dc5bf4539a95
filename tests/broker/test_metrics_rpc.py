"""rocketmq_rpc_latency on a real broker: sends, a long-polling pull answered later, an unknown
request code; and with DISABLE no request is timed at all."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.broker.metrics.rpc import TimedDispatcher, frame_code
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode, SerializeType
from engine.protocol.command import encode, request
from engine.remoting.client import RemotingClient
from engine.remoting.dispatch import RequestDispatcher

from .conftest import running_broker
from .helpers import pull_request, send_request

NODE = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}
NAME = "rocketmq_rpc_latency_milliseconds"
BOUNDS = ("1.0", "3.0", "5.0", "7.0", "10.0", "100.0", "1000.0", "2000.0", "3000.0", "+Inf")


@pytest.fixture
def broker(prom_broker: BrokerController) -> BrokerController:
    return prom_broker


def latency(broker: BrokerController, request_code: str, response_code: str, *,
            long_polling: bool = False, result: str = "success"
            ) -> tuple[list[float], float, float] | None:
    """(cumulative buckets, sum, count) of one label set, or None if it has no series."""
    assert broker.metrics is not None
    labels = {**NODE, "protocol_type": "remoting", "request_code": request_code,
              "response_code": response_code,
              "is_long_polling": "true" if long_polling else "false", "result": result}
    get = broker.metrics.registry.get_sample_value
    count = get(f"{NAME}_count", labels)
    if count is None:
        return None
    buckets = [get(f"{NAME}_bucket", {**labels, "le": le}) for le in BOUNDS]
    total = get(f"{NAME}_sum", labels)
    assert None not in buckets and total is not None
    return [b for b in buckets if b is not None], total, count


async def test_sends_pulls_and_unknown_codes_are_timed(broker: BrokerController,
                                                       client: RemotingClient) -> None:
    addr = broker.addr
    sends = await asyncio.gather(*(client.invoke(addr, send_request("Timed", b"x" * 10))
                                   for _ in range(20)))  # pipelined: batched by the broker
    assert {r.code for r in sends} == {ResponseCode.SUCCESS}
    now = await client.invoke(addr, pull_request("Timed", 0, 0))
    assert now.code == ResponseCode.SUCCESS
    empty = await client.invoke(addr, pull_request("Timed", 1, 0))
    assert empty.code == ResponseCode.PULL_NOT_FOUND
    # held: nothing at the offset, so the broker answers when the suspension times out
    held = await client.invoke(addr, pull_request("Timed", 2, 0, suspend_ms=50))
    assert held.code == ResponseCode.PULL_NOT_FOUND
    unknown = await client.invoke(addr, request(9999, {}))
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

    sent = latency(broker, "send_message_v2", "success")
    assert sent is not None
    buckets, total, count = sent
    assert count == 20 and buckets[-1] == 20
    assert buckets == sorted(buckets) and 0 <= total <= 20 * 3000

    assert latency(broker, "pull_message", "success") is not None
    assert latency(broker, "pull_message", "success", long_polling=True) is None
    quick = latency(broker, "pull_message", "pull_not_found")
    assert quick is not None and quick[2] == 1
    later = latency(broker, "pull_message", "pull_not_found", long_polling=True)
    assert later is not None
    buckets, total, count = later
    assert count == 1 and total >= 50  # waited out its 50 ms
    assert buckets[BOUNDS.index("10.0")] == 0 and buckets[-1] == 1

    refused = latency(broker, "9999", "request_code_not_supported")
    assert refused is not None and refused[2] == 1


async def test_an_answer_failing_in_its_handler_is_timed_as_system_error(
        broker: BrokerController, client: RemotingClient) -> None:
    # a heartbeat without a body: the handler raises, the broker answers SYSTEM_ERROR
    resp = await client.invoke(broker.addr, request(RequestCode.HEART_BEAT, {}))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    failed = latency(broker, "heart_beat", "system_error")
    assert failed is not None and failed[2] == 1


async def test_a_oneway_request_is_timed_as_oneway(broker: BrokerController,
                                                   client: RemotingClient) -> None:
    addr = broker.addr
    assert (await client.invoke(addr, send_request("Once", b"x"))).code == 0
    update = {"consumerGroup": "CG", "topic": "Once", "queueId": "0", "commitOffset": "1"}
    await client.invoke_oneway(addr, request(RequestCode.UPDATE_CONSUMER_OFFSET, update))
    # answered on the same connection after the oneway: the oneway has been handled
    assert (await client.invoke(addr, send_request("Once", b"y"))).code == 0
    assert broker.state.offsets.query("CG", "Once", 0) == 1
    oneway = latency(broker, "update_consumer_offset", "success", result="oneway")
    assert oneway is not None and oneway[2] == 1
    assert latency(broker, "update_consumer_offset", "success") is None


def test_frame_code_reads_json_and_binary_answers() -> None:
    cmd = request(10, {})
    for code in (0, 1, 19, 300):
        for kind in (SerializeType.JSON, SerializeType.ROCKETMQ):
            answer = cmd.response(code, "why")
            object.__setattr__(answer, "serialize_type", kind)
            assert frame_code(encode(answer)) == code


async def test_disabled_metrics_install_no_timing(tmp_path: Path,
                                                  namesrv: NamesrvController) -> None:
    async with running_broker(tmp_path, namesrv) as plain:
        assert plain.metrics is None
        servers = [s for s in (plain.server, plain.fast_server) if s is not None]
        assert servers and all(type(s.dispatcher) is RequestDispatcher for s in servers)


async def test_prom_times_every_server(broker: BrokerController) -> None:
    servers = [s for s in (broker.server, broker.fast_server) if s is not None]
    assert servers and all(isinstance(s.dispatcher, TimedDispatcher) for s in servers)

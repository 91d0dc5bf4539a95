"""A real Prometheus scrapes a real broker's /metrics: the queries dashboards run answer."""

from __future__ import annotations

import pytest

from engine.broker.controller import BrokerController
from engine.protocol.codes import ResponseCode
from engine.remoting.client import RemotingClient
from tests.prometheus import PrometheusLauncher, Result

from .helpers import pull_request, send_request


@pytest.fixture
def broker(prom_broker: BrokerController) -> BrokerController:
    return prom_broker


def values(result: Result) -> list[float]:
    return [float(sample["value"][1]) for sample in result]


async def test_prometheus_reads_messages_in_and_the_lag_of_a_group_left_behind(
        broker: BrokerController, client: RemotingClient,
        prometheus: PrometheusLauncher) -> None:
    assert broker.metrics is not None
    for i in range(5):
        resp = await client.invoke(broker.addr, send_request("Orders", f"m{i}".encode()))
        assert resp.code == ResponseCode.SUCCESS
    # group CG consumes one message and commits it: four are left behind
    resp = await client.invoke(broker.addr, pull_request("Orders", 0, 1, group="CG",
                                                         commit_offset=1, max_nums=1))
    assert resp.code == ResponseCode.SUCCESS
    server = await prometheus.start([f"127.0.0.1:{broker.metrics.port}"])

    expr = 'sum(rocketmq_messages_in_total{topic="Orders",node_id="broker-a"})'
    await server.wait_for(expr, lambda r: values(r) == [5.0])
    lag = await server.wait_for(
        'rocketmq_consumer_lag_messages{consumer_group="CG",topic="Orders"}',
        lambda r: values(r) == [4.0])
    assert lag[0]["metric"]["cluster"] == "DefaultCluster"
    assert lag[0]["metric"]["is_retry"] == "false"
    up = await server.query('up{job="rocketmq"}')
    assert values(up) == [1.0]

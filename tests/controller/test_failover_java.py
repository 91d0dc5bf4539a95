"""Apache 4.9.8's Java producer (the 4.x client) under a controller-mode failover (opt-in:
needs the Apache build named by APACHE_RMQ_HOME): it finds the new master through the route
it polls, and every send it was told SEND_OK for is on the new master."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from benchmarks.java_producer import JavaProducer, available
from engine.controller.manager import ControllerManager
from engine.namesrv.controller import NamesrvController
from engine.remoting.client import RemotingClient
from tests.controller.test_failover import (
    QUEUES,
    TOPIC,
    bodies_on,
    master_of,
    three_brokers,
    until,
)
from tests.ha.procs import BrokerProcess
from tests.ha.traffic import create_topic, wait_topic_on

pytestmark = [pytest.mark.skipif(not available(),
                                 reason="needs APACHE_RMQ_HOME (the Apache 4.9.8 build)"),
              pytest.mark.timeout(300)]


async def test_java_producer_keeps_every_acknowledged_send_through_a_failover(
        tmp_path: Path, namesrv: NamesrvController, controller: ControllerManager,
        brokers: list[BrokerProcess]) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    producer = await asyncio.to_thread(JavaProducer, tmp_path / "java", ns, TOPIC, "java-", 0)
    by_id = await three_brokers(tmp_path, ns, controller, brokers)
    client = RemotingClient()
    try:
        await create_topic(client, ns, by_id[1].addr, TOPIC, QUEUES)
        for broker in (by_id[2], by_id[3]):
            await wait_topic_on(client, broker.addr, TOPIC)
        running = asyncio.create_task(producer.run())
        try:
            await until(lambda: len(producer.acked) >= 100 or running.done(), 120)
            assert not running.done(), "the Java producer ended early"
            old = by_id[1]
            old.kill()  # SIGKILL while the Java client sends
            await until(lambda: master_of(controller)[0] not in (None, 1), 30)
            new_id, epoch = master_of(controller)
            assert new_id in (2, 3) and epoch == 2
            new = by_id[new_id]
            await until(lambda: sum(o.broker == new.addr for o in producer.acked) >= 100, 120)
            producer.stop()
            assert await asyncio.wait_for(running, 60) == 0
        finally:
            await producer.kill()
        acked = {producer.body(o.number) for o in producer.acked}
        assert {o.broker for o in producer.acked} == {old.addr, new.addr}
        assert acked <= await bodies_on(client, ns, new.addr)  # nothing acknowledged is lost
    finally:
        await client.close()

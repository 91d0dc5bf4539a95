"""Role switching with real broker processes and the mqadmin CLI: failover after
SIGKILL, a switchover under traffic, a stale master returning, roles surviving restarts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from engine.ha.status import HARuntimeInfo
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import ResponseCode
from engine.remoting.client import RemotingClient
from tests.broker.helpers import send_request
from tests.ha.inproc import ha_status
from tests.ha.procs import BrokerProcess, wait_for_slave
from tests.ha.stores import assert_same_stores, queue_entries
from tests.ha.traffic import Consumer, Producer, create_topic, route_of, wait_topic_on
from tests.mqadmin.cli import invoke

TOPIC = "HaTopic"
QUEUES = 4


async def until_status(client: RemotingClient, addr: str,
                       check: Callable[[HARuntimeInfo], object],
                       timeout: float = 15) -> HARuntimeInfo:
    """Poll the HA status of `addr` until `check(status)` holds."""
    async with asyncio.timeout(timeout):
        while True:
            try:
                status = await ha_status(client, addr)
            except Exception:
                status = None
            if status is not None and check(status):
                return status
            await asyncio.sleep(0.05)


async def cli(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """The mqadmin CLI run in a thread of this process (no interpreter to start); returns
    (exit code, stdout, stderr)."""
    result = await asyncio.to_thread(invoke, *args,
                                     env={"MQADMIN_HOME": str(tmp_path / "mqadmin")})
    return result.exit_code, result.stdout, result.stderr


async def send(client: RemotingClient, addr: str, body: bytes, queue_id: int = 0) -> int:
    resp = await client.invoke(addr, send_request(TOPIC, body, queue_id=queue_id), timeout=5)
    return resp.code


async def bodies_on(client: RemotingClient, ns: str, addr: str) -> set[bytes]:
    consumer = Consumer(client, ns, TOPIC, QUEUES, addr=addr)
    while await consumer.poll_once():
        pass
    return consumer.got


async def test_failover_after_sigkill_keeps_every_acknowledged_message(
        tmp_path: Path, namesrv: NamesrvController, brokers: list[BrokerProcess],
        client: RemotingClient) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    master = BrokerProcess(tmp_path, "a", ns, brokerRole="SYNC_MASTER")
    slave = BrokerProcess(tmp_path, "b", ns, brokerRole="SLAVE", brokerId=1)
    brokers += [master, slave]
    await master.start()
    await slave.start()
    await wait_for_slave(client, master)
    await create_topic(client, ns, master.addr, TOPIC, QUEUES)
    await wait_topic_on(client, slave.addr, TOPIC)  # else the new master cannot serve it
    producer = Producer(client, ns, TOPIC, QUEUES)
    stop = asyncio.Event()
    running = asyncio.create_task(producer.run(stop, pause=0))
    async with asyncio.timeout(20):
        while len(producer.acked) < 300:
            await asyncio.sleep(0.01)
    master.kill()  # SIGKILL while sends are in flight
    await asyncio.sleep(0.2)
    stop.set()
    await running
    acked = set(producer.acked)

    code, out, err = await cli(tmp_path, "failover", "-n", ns, "-b", "broker-a",
                                   "--accept-loss", "--yes", "-o", "json")
    assert code == 0, err
    steps = [row["step"] for row in json.loads(out)]
    assert steps[0] == "promote" and "verify" in steps
    assert "promote" in err  # the timeline went to stderr

    status = await ha_status(client, slave.addr)
    assert status.master and status.epoch == 1 and status.broker_id == 0
    assert acked <= await bodies_on(client, ns, slave.addr)  # nothing acknowledged is lost
    assert await send(client, slave.addr, b"after-failover") == ResponseCode.SUCCESS


async def test_failover_needs_accept_loss_when_the_slave_lacks_data(
        tmp_path: Path, namesrv: NamesrvController, brokers: list[BrokerProcess],
        client: RemotingClient) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    master = BrokerProcess(tmp_path, "a", ns)
    # This slave never replicates (its HA master address is dead) but syncs metadata, so it
    # knows how far the master got.
    slave = BrokerProcess(tmp_path, "b", ns, brokerRole="SLAVE", brokerId=1,
                          haMasterAddress="127.0.0.1:9")
    brokers += [master, slave]
    await master.start()
    await slave.start()
    await create_topic(client, ns, master.addr, TOPIC, QUEUES)
    for i in range(20):
        assert await send(client, master.addr, b"x%d" % i) == ResponseCode.SUCCESS
    await until_status(client, slave.addr,
                       lambda s: s.ha_client_runtime_info.estimated_loss_bytes > 0)
    master.kill()
    code, _, err = await cli(tmp_path, "failover", "-n", ns, "-b", "broker-a", "--yes")
    assert code == 2, err
    assert "--accept-loss" in err and "messages" in err
    assert not (await ha_status(client, slave.addr)).master  # nothing changed
    code, _, err = await cli(tmp_path, "failover", "-n", ns, "-b", "broker-a", "--yes",
                                 "--accept-loss", "--role", "SYNC_MASTER")
    assert code == 0, err
    status = await ha_status(client, slave.addr)
    assert status.master and status.broker_role == "SYNC_MASTER"


async def test_switchover_under_traffic_loses_nothing(
        tmp_path: Path, namesrv: NamesrvController, brokers: list[BrokerProcess],
        client: RemotingClient) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    a = BrokerProcess(tmp_path, "a", ns, brokerRole="SYNC_MASTER")
    b = BrokerProcess(tmp_path, "b", ns, brokerRole="SLAVE", brokerId=1)
    brokers += [a, b]
    await a.start()
    await b.start()
    await wait_for_slave(client, a)
    await create_topic(client, ns, a.addr, TOPIC, QUEUES)
    producer = Producer(client, ns, TOPIC, QUEUES)
    consumer = Consumer(client, ns, TOPIC, QUEUES)
    stop = asyncio.Event()
    tasks = [asyncio.create_task(producer.run(stop)), asyncio.create_task(consumer.run(stop))]
    async with asyncio.timeout(20):
        while len(producer.acked) < 200:
            await asyncio.sleep(0.01)

    code, out, err = await cli(tmp_path, "switchover", "-n", ns, "-b", "broker-a",
                                   "--yes", "-o", "json")
    assert code == 0, err
    steps = [row["step"] for row in json.loads(out)]
    assert steps[:4] == ["write-protect", "fence", "catch-up", "promote"]
    assert "write-perm" in steps and "rollback" not in steps
    before = len(producer.acked)
    async with asyncio.timeout(20):  # traffic goes on, now through the new master
        while len(producer.acked) < before + 200:
            await asyncio.sleep(0.01)
    stop.set()
    await asyncio.gather(*tasks)
    await consumer.drain(set(producer.acked))
    assert producer.sent_to == {a.addr, b.addr}
    assert {a.addr, b.addr} <= consumer.read_from

    route = await route_of(client, ns, TOPIC)
    assert route is not None
    new, old = await ha_status(client, b.addr), await ha_status(client, a.addr)
    assert new.master and new.epoch == 1 and new.broker_role == "SYNC_MASTER"
    assert not old.master and old.broker_id == 1 and old.epoch == 1
    assert await send(client, a.addr, b"to-the-old-master") == ResponseCode.SERVICE_NOT_AVAILABLE

    code, out, _ = await cli(tmp_path, "haStatus", "-n", ns, "-b", "broker-a", "-o", "json")
    assert code == 0
    rows = {row["addr"]: row for row in json.loads(out)}
    assert rows[b.addr]["role"] == "SYNC_MASTER" and rows[a.addr]["role"] == "SLAVE"
    assert rows[a.addr]["peer"] == f"127.0.0.1:{b.port + 1}"


async def test_stale_master_returns_as_slave_without_its_diverged_tail(
        tmp_path: Path, namesrv: NamesrvController, brokers: list[BrokerProcess],
        client: RemotingClient) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    a = BrokerProcess(tmp_path, "a", ns)
    b = BrokerProcess(tmp_path, "b", ns, brokerRole="SLAVE", brokerId=1)
    brokers += [a, b]
    await a.start()
    await b.start()
    await wait_for_slave(client, a)
    await create_topic(client, ns, a.addr, TOPIC, QUEUES)
    for i in range(30):
        assert await send(client, a.addr, b"common-%d" % i, i % QUEUES) == ResponseCode.SUCCESS
    await until_status(client, a.addr, lambda s: s.ha_connection_info
                       and s.ha_connection_info[0].diff == 0)
    await b.stop()
    for i in range(10):  # acknowledged by the master alone: they diverge
        assert await send(client, a.addr, b"diverged-%d" % i, i % QUEUES) == ResponseCode.SUCCESS
    diverged_end = (await ha_status(client, a.addr)).commit_log_max_offset
    a.kill()
    await b.start()
    code, _, err = await cli(tmp_path, "failover", "-n", ns, "-b", "broker-a", "--yes",
                                 "--accept-loss")
    assert code == 0, err
    for i in range(15):
        assert await send(client, b.addr, b"new-%d" % i, i % QUEUES) == ResponseCode.SUCCESS

    await a.start()  # the old master, with its old config and its diverged tail
    assert await send(client, a.addr, b"split-brain") != ResponseCode.SUCCESS
    status = await until_status(client, a.addr, lambda s: s.broker_role == "SLAVE")
    assert status.epoch == 1 and status.broker_id == 1
    head = await until_status(client, b.addr, lambda s: s.ha_connection_info
                              and s.ha_connection_info[0].diff == 0)
    assert head.epoch_start_offset < diverged_end
    assert "dropping commit-log bytes" in (a.dir / "logs" / "broker.log").read_text()

    # The roles survive restarts: B stays the master, A its slave.
    await b.stop()
    await a.stop()
    await b.start()
    await a.start()
    assert (await until_status(client, b.addr, lambda s: s.master)).epoch == 1
    await until_status(client, a.addr, lambda s: not s.master
                       and s.ha_client_runtime_info.is_activated)
    await a.stop()
    await b.stop()
    sa, sb = a.open_store(), b.open_store()
    try:
        assert_same_stores(sb, sa)
        bodies = {sa.look_message_by_offset(phy) for q in queue_entries(sa).values()
                  for phy, _, _ in q.values()}
        assert not any(body and b"diverged" in body for body in bodies)
    finally:
        sa.close()
        sb.close()

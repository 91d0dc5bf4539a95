"""Brokers in controller mode as real processes under one controller: a set of three elects
a master, grows its SyncStateSet, fails over when the master is killed (SIGKILL) without
losing an acknowledged message, and takes the old master back as a slave that truncated its
log by epoch."""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import replace
from pathlib import Path

from engine.client.admin.cluster import MQAdmin
from engine.controller.manager import ControllerManager
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import request
from engine.protocol.header.ha import NotifyBrokerRoleChangedRequestHeader
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient
from mqadmin.config import Endpoint
from mqadmin.operations.change import Unseen
from mqadmin.operations.ha import controller as controller_ops
from tests.broker.helpers import send_request
from tests.controller.test_raft import configs as raft_configs
from tests.controller.test_raft import leader_of
from tests.controller.test_server import now_ms
from tests.ha.inproc import ha_status
from tests.ha.procs import BrokerProcess
from tests.ha.traffic import Consumer, Producer, create_topic, wait_topic_on
from tests.mqadmin.cli import invoke, rows_of

TOPIC = "CtlTopic"
QUEUES = 4
NAME = "broker-a"

#: Controller mode, fast: heartbeats every 200 ms, SyncStateSet checks every 300 ms.
CONTROLLER_MODE = {"enableControllerMode": "true", "brokerRole": "SYNC_MASTER",
                   "allAckInSyncStateSet": "true", "brokerHeartbeatInterval": "200",
                   "checkSyncStateSetPeriod": "300", "haMaxTimeSlaveNotCatchup": "3000",
                   "controllerHeartBeatTimeoutMills": "3000", "slaveTimeout": "3000"}


async def until(check: object, timeout: float = 30) -> None:
    async with asyncio.timeout(timeout):
        while not check():  # type: ignore[operator]
            await asyncio.sleep(0.05)


def master_of(controller: ControllerManager) -> tuple[int | None, int]:
    found = controller.state.sets.get(NAME)
    return (found.master_id, found.master_epoch) if found else (None, 0)


def in_sync(controller: ControllerManager) -> frozenset[int]:
    found = controller.state.sets.get(NAME)
    return found.sync_state_set if found else frozenset()


async def bodies_on(client: RemotingClient, ns: str, addr: str) -> set[bytes]:
    consumer = Consumer(client, ns, TOPIC, QUEUES, addr=addr)
    while await consumer.poll_once():
        pass
    return consumer.got


async def test_kill_the_master_a_slave_takes_over_the_old_one_follows(
        tmp_path: Path, namesrv: NamesrvController, controller: ControllerManager,
        brokers: list[BrokerProcess]) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    by_id = await three_brokers(tmp_path, ns, controller, brokers)
    assert master_of(controller) == (1, 1)
    client = RemotingClient()
    try:
        master = by_id[1]
        # allAckInSyncStateSet waits for the members by name: each slave's end of its HA
        # connection, in its HA status, is the address its master sees
        seen = {c.addr for c in (await ha_status(client, master.addr)).ha_connection_info}
        ends = {(await ha_status(client, by_id[i].addr)).ha_client_runtime_info.local_addr
                for i in (2, 3)}
        assert ends == seen and len(seen) == 2
        await create_topic(client, ns, master.addr, TOPIC, QUEUES)
        for broker in (by_id[2], by_id[3]):
            await wait_topic_on(client, broker.addr, TOPIC)
        producer = Producer(client, ns, TOPIC, QUEUES)
        stop = asyncio.Event()
        running = asyncio.create_task(producer.run(stop, pause=0))
        await until(lambda: len(producer.acked) >= 300, 30)
        master.kill()  # SIGKILL while sends are in flight
        await until(lambda: master_of(controller)[0] not in (None, 1), 30)
        new_id, new_epoch = master_of(controller)
        assert new_epoch == 2
        new_master = by_id[new_id]
        before = len(producer.acked)
        await until(lambda: new_master.addr in producer.sent_to
                    and len(producer.acked) > before + 50, 30)
        stop.set()
        await running
        acked = set(producer.acked)
        assert acked <= await bodies_on(client, ns, new_master.addr)  # nothing acked is lost

        await master.start()  # the old master comes back with epoch 1
        async with asyncio.timeout(30):
            while True:
                status = await ha_status(client, master.addr)
                if not status.master and status.epoch == 2:
                    break
                await asyncio.sleep(0.05)
        assert master_of(controller) == (new_id, 2)
        await until(lambda: 1 in in_sync(controller), 30)  # it caught up with the new master
        mine = await ha_status(client, master.addr)
        theirs = await ha_status(client, new_master.addr)
        assert mine.commit_log_max_offset <= theirs.commit_log_max_offset
        resp = await client.invoke(new_master.addr, send_request(TOPIC, b"after"), timeout=5)
        assert resp.code == ResponseCode.SUCCESS
        rows = rows_of(await asyncio.to_thread(
            invoke, "getBrokerEpoch", "-n", ns, "-b", NAME, "-o", "json"))
        epochs = {(r["brokerAddr"], r["epoch"]) for r in rows}
        assert {(new_master.addr, 1), (new_master.addr, 2), (master.addr, 2)} <= epochs
    finally:
        await client.close()


async def three_brokers(tmp_path: Path, ns: str, controller: ControllerManager,
                        brokers: list[BrokerProcess],
                        **changes: str) -> dict[int, BrokerProcess]:
    """Broker 1 (the master: the first to register), then brokers 2 and 3 started together;
    by controller id once all three are in the SyncStateSet."""
    made = await start_three(tmp_path, ns, controller.address, brokers, **changes)
    await until(lambda: in_sync(controller) == {1, 2, 3})
    return ids_of(controller, made)


async def start_three(tmp_path: Path, ns: str, controller_addr: str,
                      brokers: list[BrokerProcess], **changes: str) -> list[BrokerProcess]:
    settings = {**CONTROLLER_MODE, "controllerAddr": controller_addr, **changes}
    made = [BrokerProcess(tmp_path, store, ns, **settings) for store in ("a", "b", "c")]
    brokers.extend(made)
    await made[0].start()
    await asyncio.gather(made[1].start(), made[2].start())
    return made


def ids_of(controller: ControllerManager, made: list[BrokerProcess]) -> dict[int, BrokerProcess]:
    by_addr = {b.addr: b for b in made}
    members = controller.state.sets[NAME].members
    return {i: by_addr[m.address] for i, m in members.items()}


async def test_heartbeats_go_on_while_the_controller_is_busy_committing(
        tmp_path: Path, namesrv: NamesrvController, controller: ControllerManager,
        brokers: list[BrokerProcess]) -> None:
    """While the controller holds its lock (an election being committed; seen to take 3 s
    with a controller just killed), a broker's rounds wait on it, its heartbeats must not:
    else the controller, the election done, takes the live master for dead and elects
    again.  A heartbeat timeout of 2.5 s: only a broker stalled that long fails it."""
    master = BrokerProcess(tmp_path, "a", f"127.0.0.1:{namesrv.port}", **{
        **CONTROLLER_MODE, "controllerAddr": controller.address,
        "controllerHeartBeatTimeoutMills": "2500"})
    brokers.append(master)
    await master.start()
    await until(lambda: master_of(controller) == (1, 1) and controller.alive(NAME, 1))
    loop = asyncio.get_running_loop()
    async with controller.lock:  # the broker's GET_REPLICA_INFO waits on it, 3 s a round
        # longer than a heartbeat timeout past the last heartbeat before it: a round waits
        # 3 s here, so heartbeats sent only between rounds (every 3.2 s) lapse within it;
        # those on their own clock come every 200 ms
        end = loop.time() + 3.5
        while loop.time() < end:
            assert controller.alive(NAME, 1), "the heartbeats lapsed"
            await asyncio.sleep(0.1)
    assert master_of(controller) == (1, 1)


async def test_a_frozen_master_never_acknowledges_as_a_second_master(
        tmp_path: Path, namesrv: NamesrvController, controller: ControllerManager,
        brokers: list[BrokerProcess]) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    # Shorter than CONTROLLER_MODE: the controller gives up on the frozen master after 1.5 s
    # without heartbeats (7 missed ones), and the late send the thawed master may take
    # before it learns it lost waits 1.5 s for slaves that have left it.
    by_id = await three_brokers(tmp_path, ns, controller, brokers,
                                controllerHeartBeatTimeoutMills="1500", slaveTimeout="1500")
    old = by_id[1]
    client = RemotingClient()
    try:
        await create_topic(client, ns, old.addr, TOPIC, QUEUES)
        assert old.proc is not None
        os.kill(old.proc.pid, signal.SIGSTOP)  # frozen: connections open, nothing answers
        try:
            # its heartbeats stop: after controllerHeartBeatTimeoutMills a slave is elected
            await until(lambda: master_of(controller)[0] not in (None, 1), 30)
        finally:
            os.kill(old.proc.pid, signal.SIGCONT)
        new_id, epoch = master_of(controller)
        assert epoch == 2
        answers = []
        async with asyncio.timeout(30):  # the thawed master learns it lost and follows
            while True:
                resp = await client.invoke(old.addr, send_request(TOPIC, b"late"), timeout=10)
                answers.append(resp.code)
                status = await ha_status(client, old.addr)
                if not status.master and status.epoch == 2:
                    break
        assert ResponseCode.SUCCESS not in answers  # never acknowledged as a second master
        resp = await client.invoke(by_id[new_id].addr, send_request(TOPIC, b"new"), timeout=5)
        assert resp.code == ResponseCode.SUCCESS
    finally:
        await client.close()


async def test_the_set_fails_over_while_the_controller_leader_dies_too(
        tmp_path: Path, namesrv: NamesrvController, brokers: list[BrokerProcess]) -> None:
    """Three controllers: the master broker and the leader controller are killed at once;
    the two other controllers elect a leader, which elects a new master."""
    ns = f"127.0.0.1:{namesrv.port}"
    managers = [ControllerManager(replace(c, scan_not_active_broker_interval=200,
                                          scan_inactive_master_interval=200), clock=now_ms)
                for c in raft_configs(tmp_path)]
    try:
        for m in managers:
            await m.start()
        leader = await asyncio.wait_for(leader_of(managers), 30)
        await start_three(tmp_path, ns, ";".join(m.address for m in managers), brokers)
        await until(lambda: in_sync(leader) == {1, 2, 3})
        by_addr = {b.addr: b for b in brokers}
        master = by_addr[leader.state.sets[NAME].address(1) or ""]
        master.kill()
        await leader.stop()  # during the election the master's death starts
        rest = [m for m in managers if m is not leader]
        new_leader = await asyncio.wait_for(leader_of(rest), 30)
        await until(lambda: master_of(new_leader)[0] not in (None, 1), 30)
        new_id, epoch = master_of(new_leader)
        assert epoch == 2
        new_master = by_addr[new_leader.state.sets[NAME].address(new_id) or ""]
        client = RemotingClient()
        try:
            async with asyncio.timeout(30):  # once the broker took the role it was given
                while (code := (await client.invoke(new_master.addr, send_request(
                        TOPIC, b"x"), timeout=5)).code) != ResponseCode.SUCCESS:
                    if code == ResponseCode.TOPIC_NOT_EXIST:
                        await create_topic(client, ns, new_master.addr, TOPIC, QUEUES)
                    else:
                        await asyncio.sleep(0.05)
        finally:
            await client.close()
    finally:
        for m in managers:
            await m.stop()


async def test_a_sync_master_refuses_writes_below_min_in_sync_replicas(
        tmp_path: Path, namesrv: NamesrvController, controller: ControllerManager,
        brokers: list[BrokerProcess]) -> None:
    ns = f"127.0.0.1:{namesrv.port}"
    settings = {**CONTROLLER_MODE, "controllerAddr": controller.address,
                "minInSyncReplicas": "2"}
    made = [BrokerProcess(tmp_path, s, ns, **settings) for s in ("a", "b")]
    brokers.extend(made)
    await made[0].start()
    client = RemotingClient()
    try:
        await create_topic(client, ns, made[0].addr, TOPIC, QUEUES)
        refused = await client.invoke(made[0].addr, send_request(TOPIC, b"alone"), timeout=5)
        # 5.3.3's answer: SYSTEM_ERROR, "in-sync replicas not enough"
        assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR,
                                                  "in-sync replicas not enough")
        async with MQAdmin(ns) as admin:  # the dashboard's controller panel raises the alert
            [row] = await controller_ops.controller_sets(admin, {NAME: made[0].addr})
        assert (row["controller"], row["inSync"], row["belowMin"]) == (
            controller.address, "1", True)
        await made[1].start()
        await until(lambda: in_sync(controller) == {1, 2})
        async with asyncio.timeout(30):  # the master learns its set grew at its next check
            while (await client.invoke(made[0].addr, send_request(TOPIC, b"two"),
                                       timeout=5)).code != ResponseCode.SUCCESS:
                await asyncio.sleep(0.1)
        async with MQAdmin(ns) as admin:  # the dashboard's electMaster, planned and applied
            [row] = await controller_ops.controller_sets(admin, {NAME: made[0].addr})
            assert (row["inSync"], row["belowMin"]) == ("1,2", False)
            elect = controller_ops.ElectMasterChange(controller.address, "HaCluster", NAME, 2,
                                                     now_ms)
            planned = await elect.plan(admin, Endpoint([ns]), Unseen())
            assert planned.rows == [{"brokerName": NAME, "masterBrokerId": 1,
                                     "newMasterBrokerId": 2}]
            outcome = await elect.apply(admin, Endpoint([ns]), planned, Unseen())
        assert outcome.ok and master_of(controller) == (2, 2)
    finally:
        await client.close()


async def test_a_slave_waits_until_the_new_master_has_begun_its_epoch(
        tmp_path: Path, namesrv: NamesrvController, controller: ControllerManager,
        brokers: list[BrokerProcess]) -> None:
    """Told of an election before the new master promoted itself, a slave does not follow
    it (it could not know where the logs diverge) and stops replicating from the old master;
    at its next round, the controller's word being unchanged, it follows its master again."""
    ns = f"127.0.0.1:{namesrv.port}"
    by_id = await three_brokers(tmp_path, ns, controller, brokers)
    client = RemotingClient()
    try:
        early = request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, to_ext(
            NotifyBrokerRoleChangedRequestHeader(by_id[2].addr, 2, master_broker_id=2)))
        answer = await client.invoke(by_id[3].addr, early, timeout=5)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert "has not begun epoch 2" in (answer.remark or "")
        async with asyncio.timeout(30):  # its next round: broker 1 is still master, follow it
            while not (await ha_status(client, by_id[3].addr)).ha_client_runtime_info \
                    .is_activated:
                await asyncio.sleep(0.05)
        assert master_of(controller) == (1, 1)
    finally:
        await client.close()

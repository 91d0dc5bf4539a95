"""Replication between two stores in one process: HAService on one, HAClient on the other."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from engine.ha.client import HAClient
from engine.ha.master import HAService
from engine.ha.wire import ReportDecoder, TransferDecoder, encode_report
from engine.store import MessageStore
from engine.store.config import BrokerRole
from engine.store.results import PutMessageStatus
from tests.ha.stores import assert_same_stores
from tests.store.helpers import msg, small_config

#: How long a test waits for a slave's ack before failing.  Beside two whole suites the
#: longest of 756 waits took 0.16 s: a wait this long is a stall, not a busy machine.
ACK_TIMEOUT_S = 10


@pytest.fixture
async def master(tmp_path: Path) -> AsyncIterator[MessageStore]:
    store = MessageStore(small_config(tmp_path / "master"))
    await store.start()
    yield store
    await store.shutdown()


@pytest.fixture
def make_slave(tmp_path: Path) -> Callable[[str], MessageStore]:
    def make(name: str = "slave") -> MessageStore:
        store = MessageStore(small_config(tmp_path / name, broker_role=BrokerRole.SLAVE))
        store.load()
        return store
    return make


@pytest.fixture
async def service(master: MessageStore) -> AsyncIterator[HAService]:
    svc = HAService(master, host="127.0.0.1", heartbeat_interval_ms=100,
                    housekeeping_interval_ms=2000)
    await svc.start()
    yield svc
    await svc.stop()


def client_for(store: MessageStore, svc: HAService, **kw: int) -> HAClient:
    kw = {"heartbeat_interval_ms": 100, "reconnect_interval_ms": 20, **kw}
    return HAClient(store, lambda: f"127.0.0.1:{svc.port}", **kw)


async def slave_connected(svc: HAService) -> None:
    """Until a slave's first report arrived (the master knows where to start)."""
    async with asyncio.timeout(60):
        while not any(c.slave_request_offset >= 0 for c in svc.connections):
            await asyncio.sleep(0.01)


async def acked(service: HAService, end: int, client: HAClient, slave: MessageStore) -> None:
    """Until a slave acknowledged every byte before `end`; else what each side had then."""
    if not await service.wait_acked(end, ACK_TIMEOUT_S):
        raise AssertionError(
            f"no ack of offset {end} in {ACK_TIMEOUT_S} s: master max offset "
            f"{service.store.get_max_phy_offset()}, acked {service.acked_offset()}, "
            f"connections {service.connections}, slave max offset "
            f"{slave.get_max_phy_offset()}, slave side {client.runtime_info()}")


def put(store: MessageStore, start: int, n: int) -> int:
    for i in range(start, start + n):
        r = store.append_message(msg(i, queue_id=i % 3, size=60 + (i * 37) % 400))
        assert r.status is PutMessageStatus.PUT_OK
    return store.get_max_phy_offset()


async def test_slave_copies_every_segment_and_builds_its_own_queues(
        master: MessageStore, service: HAService, make_slave: Callable[[str], MessageStore]
) -> None:
    put(master, 0, 40)  # several 4 KiB segments before the slave exists
    slave = make_slave("slave")
    await slave.start()
    client = client_for(slave, service)
    client.start()
    try:
        end = put(master, 40, 120)
        await acked(service, end, client, slave)
        # An empty slave starts at the master's last segment, as 4.9.7 does.
        assert slave.get_min_phy_offset() > 0
        assert_same_stores(master, slave, from_offset=slave.get_min_phy_offset())
        info = service.connection_infos()
        assert len(info) == 1 and info[0].diff == 0 and info[0].in_sync
        assert client.runtime_info().is_activated
    finally:
        await client.stop()
        await slave.shutdown()


async def test_slave_with_the_whole_log_and_a_restart_resumes(
        master: MessageStore, service: HAService, make_slave: Callable[[str], MessageStore]
) -> None:
    slave = make_slave("slave")
    await slave.start()
    client = client_for(slave, service)
    client.start()
    await slave_connected(service)
    end = put(master, 0, 50)
    await acked(service, end, client, slave)
    await client.stop()
    await slave.shutdown()
    end = put(master, 50, 50)  # written while the slave is away
    slave = make_slave("slave")
    await slave.start()
    client = client_for(slave, service)
    client.start()
    try:
        await acked(service, end, client, slave)
        assert_same_stores(master, slave)
    finally:
        await client.stop()
        await slave.shutdown()


async def test_offset_mismatch_closes_reconnects_and_resumes(
        master: MessageStore, service: HAService, make_slave: Callable[[str], MessageStore]
) -> None:
    slave = make_slave("slave")
    await slave.start()
    client = client_for(slave, service)
    client.start()
    await slave_connected(service)
    try:
        end = put(master, 0, 30)
        await acked(service, end, client, slave)
        conn = service.connections[0]
        entry = slave.get_queue_entry("TopicTest", 1, 4)
        assert entry is not None
        slave.truncate_to(entry[0])  # the slave's log no longer ends where the master sends
        put(master, 30, 5)
        while service.connections and service.connections[0] is conn:
            await asyncio.sleep(0.01)  # the slave refused the next transfer and closed
        end = put(master, 35, 20)
        await acked(service, end, client, slave)
        assert_same_stores(master, slave)
    finally:
        await client.stop()
        await slave.shutdown()


async def test_master_closes_a_slave_ahead_of_it_and_a_silent_one(master: MessageStore) -> None:
    svc = HAService(master, host="127.0.0.1", heartbeat_interval_ms=50,
                    housekeeping_interval_ms=300)
    await svc.start()
    try:
        put(master, 0, 3)
        reader, writer = await asyncio.open_connection("127.0.0.1", svc.port)
        writer.write(encode_report(master.get_max_phy_offset() + 1))
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed at once
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", svc.port)
        writer.write(encode_report(master.get_max_phy_offset()))
        decoder = TransferDecoder()
        frames = decoder.feed(await asyncio.wait_for(reader.read(100), 5))
        assert frames and frames[0].is_heartbeat  # nothing new: a heartbeat
        assert frames[0].offset == master.get_max_phy_offset()
        while await asyncio.wait_for(reader.read(100), 5):  # then silence gets it closed
            pass
        assert not svc.connections
        writer.close()
    finally:
        await svc.stop()


async def test_sync_waits_and_slave_not_available(master: MessageStore) -> None:
    svc = HAService(master, host="127.0.0.1", heartbeat_interval_ms=1000)
    await svc.start()
    try:
        r = master.append_message(msg(1))
        assert (await svc.replicate(r, 100)).status is PutMessageStatus.SLAVE_NOT_AVAILABLE
        _, writer = await asyncio.open_connection("127.0.0.1", svc.port)
        writer.write(encode_report(0))  # a slave that never acknowledges anything
        await slave_connected(svc)
        r = master.append_message(msg(2))
        timed_out = await svc.replicate(r, 100)
        assert timed_out.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        waiting = asyncio.ensure_future(svc.replicate(master.append_message(msg(3)), 5000))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        writer.write(encode_report(master.get_max_phy_offset()))
        assert (await waiting).status is PutMessageStatus.PUT_OK
        assert ReportDecoder().feed(b"") == []
        writer.close()
    finally:
        await svc.stop()

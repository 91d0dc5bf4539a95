"""The proxy as worker processes (workers.py) with the official Python client: two workers on
one port, a receipt received through one acked through the other, a killed worker started
again while a producer keeps sending, the port refused when in use, TLS modes."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from benchmarks.processes import children
from engine.client.admin.broker import BrokerAdmin
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.proxy.server import ProxyPortInUseError
from engine.remoting.client import RemotingClient
from tests.broker.test_main import write_conf
from tests.proxy.conftest import FRONT, in_thread
from tests.proxy.official import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)
from tests.proxy.test_main import STARTUP_S, proxy_json, send_one, serve_until_line
from tests.proxy.workers import WORKERS_PROXY, Workers, connected, running_workers

TOPIC = "Spread"
GROUP = "SpreadConsumers"


@pytest.fixture
async def workers(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Workers]:
    async with running_workers(tmp_path, namesrv, topics={TOPIC: None}) as w:
        yield w


def consumer(workers: Workers) -> SimpleConsumer:
    return SimpleConsumer(ClientConfiguration(workers.endpoint, Credentials()), GROUP,
                          {TOPIC: FilterExpression("*")}, await_duration=1)


def producer(workers: Workers) -> Producer:
    return Producer(ClientConfiguration(workers.endpoint, Credentials()), (TOPIC,))


async def send(client: Producer, count: int, prefix: str, *, failures: int = 0) -> list[str]:
    """The ids of `count` sends; with `failures`, a send that fails (its own retries all
    reaching a killed worker's connection before the channel reconnects) is made again, up
    to that many times, as an application would: only acknowledged sends count."""
    ids = []
    for i in range(count):
        msg = Message()
        msg.topic, msg.body = TOPIC, f"{prefix}-{i}".encode()
        while True:
            try:
                ids.append(str((await in_thread(client.send, msg)).message_id))
                break
            except Exception:
                if failures <= 0:
                    raise
                failures -= 1
                await asyncio.sleep(0.2)
    return ids


async def test_a_receipt_from_one_worker_is_acked_through_the_other(workers: Workers) -> None:
    assert len(workers.proxy.pids) == 2
    prod, _ = await connected(workers, lambda: producer(workers))
    consumers: list[tuple[SimpleConsumer, int]] = []
    try:
        ids = await send(prod, 6, "spread")
        # Clients until one of them is on each worker (the kernel hands new connections to
        # the workers' joins in turn, which a test cannot rely on).
        for _ in range(12):
            c, index = await connected(workers, lambda: consumer(workers))
            consumers.append((c, index))  # type: ignore[arg-type]
            if len({i for _, i in consumers}) == 2:
                break
        assert len({i for _, i in consumers}) == 2, "every client reached the same worker"
        first, first_worker = consumers[0]
        other = next(c for c, i in consumers if i != first_worker)
        got: list[Message] = []
        for _ in range(10):
            got += await in_thread(first.receive, 32, 30) or []
            if len(got) >= len(ids):
                break
        assert sorted(m.message_id for m in got) == sorted(ids)
        for m in got:
            await in_thread(other.ack, m)  # the receipts of one worker, acked on the other
        # none comes back, through either worker (the receives side by side)
        after = await asyncio.gather(*(in_thread(c.receive, 32, 1) for c, _ in consumers))
        assert all(got in (None, []) for got in after), after
    finally:
        for c, _ in consumers:
            await in_thread(c.shutdown)
        await in_thread(prod.shutdown)


async def test_a_killed_worker_is_started_again_and_the_producer_loses_nothing(
        workers: Workers) -> None:
    prod, index = await connected(workers, lambda: producer(workers))
    try:
        ids = await send(prod, 5, "before")
        os.kill(workers.proxy.pids[index], signal.SIGKILL)
        # the client reconnects (to either worker); sends refused until then are made again
        ids += await send(prod, 10, "after", failures=50)
        for _ in range(600):
            if workers.proxy.restarts == 1 and len(workers.proxy.pids) == 2:
                break
            await asyncio.sleep(0.05)
        assert workers.proxy.restarts == 1
        ids += await send(prod, 5, "restarted")
    finally:
        await in_thread(prod.shutdown)
    cons = consumer(workers)
    await in_thread(cons.startup)
    try:
        got: set[str] = set()
        for _ in range(20):
            for m in await in_thread(cons.receive, 32, 30) or []:
                got.add(str(m.message_id))
                await in_thread(cons.ack, m)
            if got >= set(ids):
                break
        assert got >= set(ids)
    finally:
        await in_thread(cons.shutdown)


async def test_a_port_in_use_is_refused(tmp_path: Path, namesrv: NamesrvController) -> None:
    with socket.create_server(("0.0.0.0", 0)) as taken:
        port = taken.getsockname()[1]
        for mode in ("permissive", "disabled"):
            config = dataclasses.replace(WORKERS_PROXY, grpc_server_port=port,
                                         tls_server_mode=mode)
            with pytest.raises(ProxyPortInUseError, match=str(port)):
                async with running_workers(tmp_path / mode, namesrv, config, {TOPIC: None}):
                    pass


@pytest.mark.parametrize("mode", ["disabled", "enforcing"])
async def test_the_other_tls_modes_serve_through_workers_on_a_reused_port(
        tmp_path: Path, namesrv: NamesrvController, mode: str) -> None:
    config = dataclasses.replace(WORKERS_PROXY, tls_server_mode=mode)
    async with running_workers(tmp_path, namesrv, config, {TOPIC: None}) as w:
        assert len(w.proxy.pids) == 2
        if mode == "disabled":  # the Python client connects in plaintext
            prod, _ = await connected(w, lambda: producer(w))
            try:
                assert len(await send(prod, 2, mode)) == 2
            finally:
                await in_thread(prod.shutdown)


async def ended(pid: int) -> None:
    """Returns once process `pid` has ended (a pidfd turns readable)."""
    done = asyncio.Event()
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    loop.add_reader(pidfd, done.set)
    try:
        await asyncio.wait_for(done.wait(), STARTUP_S)
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
async def test_mqbroker_enable_proxy_runs_its_workers_and_they_end_with_it(
        tmp_path: Path, namesrv: NamesrvController, stop: str) -> None:
    conf = write_conf(tmp_path, namesrvAddr=f"127.0.0.1:{namesrv.port}")
    proc, line = await serve_until_line(
        [sys.executable, "-m", "engine.broker.main", "-c", str(conf), "--enable-proxy",
         "-pc", str(proxy_json(tmp_path, proxyWorkers=2))], tmp_path, "boot success")
    try:
        addr = line.split(", ", 1)[1].split("]", 1)[0]
        assert proc.stdout is not None
        endpoint = (await proc.stdout.readline()).decode().rsplit(" ", 1)[1].strip()
        client = RemotingClient()
        try:
            await BrokerAdmin(client).create_topic(addr, TopicConfig(TOPIC, 4, 4))
        finally:
            await client.close()
        workers = children(proc.pid, "engine.proxy.worker")
        assert len(workers) == 2
        joins = [j for w in workers for j in children(w, "engine.proxy.join_process")]
        assert len(joins) == (2 if FRONT == "grpcio" else 0)  # ours needs no join process
        assert await send_one(endpoint, TOPIC)
        proc.send_signal(getattr(signal, stop))
        code = await asyncio.wait_for(proc.wait(), STARTUP_S)
        assert code == (0 if stop == "SIGTERM" else -signal.SIGKILL)
        for pid in workers + joins:  # killed, the broker's pipes end: its workers stop
            await ended(pid)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()

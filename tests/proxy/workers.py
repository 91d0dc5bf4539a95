"""Fixtures of the proxy as worker processes: a broker in the test's process, its proxy as
`proxyWorkers` processes (workers.py), and which worker serves which connection."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc

from engine.broker.controller import BrokerController
from engine.client.admin.broker import BrokerAdmin
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig
from engine.proxy.config import ProxyConfig
from engine.proxy.local import local_workers
from engine.proxy.v2 import service_pb2_grpc
from engine.proxy.workers import ProxyWorkers
from engine.remoting.client import RemotingClient
from tests.broker.conftest import running_broker
from tests.proxy.conftest import in_thread, with_front
from tests.proxy.sockets import client_ports, served_ports

T = TypeVar("T")
#: Two workers; long polls of 1 s to 3 s (5.3.3's minimum is 5 s), so an empty receive ends at
#: its await time.
WORKERS_PROXY = ProxyConfig(grpc_server_port=0, proxy_workers=2,
                            topic_route_service_cache_refresh_seconds=1,
                            grpc_client_consumer_min_long_polling_timeout_millis=1000,
                            grpc_client_consumer_max_long_polling_timeout_millis=3000,
                            min_invisible_time_mills_for_recv=1000)


@dataclasses.dataclass
class Workers:
    broker: BrokerController
    proxy: ProxyWorkers

    @property
    def endpoint(self) -> str:
        return self.proxy.endpoint

    def worker_of(self, ports: set[int]) -> int:
        """The slot of the worker serving the connections from `ports` (this process's)."""
        for index, pid in enumerate(self.proxy.pids):
            if ports & served_ports(pid, self.proxy.port):
                return index
        raise AssertionError(f"no worker serves the connection from {ports}")


@contextlib.asynccontextmanager
async def running_workers(tmp_path: Path, namesrv: NamesrvController,
                          config: ProxyConfig = WORKERS_PROXY,
                          topics: dict[str, str | None] | None = None,
                          **broker_changes: Any) -> AsyncIterator[Workers]:
    """A broker with `topics` (name -> message.type) and its proxy as worker processes."""
    async with running_broker(tmp_path, namesrv, **broker_changes) as broker:
        client = RemotingClient(credentials=broker.access.inner_credentials())
        try:
            for topic, kind in (topics or {}).items():
                await BrokerAdmin(client).create_topic(
                    broker.addr, TopicConfig(topic, 4, 4),
                    attributes={"+message.type": kind} if kind else None)
        finally:
            await client.close()
        proxy = local_workers(broker, with_front(config))
        assert proxy is not None
        await proxy.start()
        try:
            yield Workers(broker, proxy)
        finally:
            await proxy.stop(grace=0)




async def connected(workers: Workers, make: Callable[[], T]) -> tuple[T, int]:
    """Start an official client (`make()`, then startup) and find the worker its connection
    reached."""
    before = client_ports(os.getpid(), workers.proxy.port)
    client = make()
    await in_thread(client.startup)  # type: ignore[attr-defined]
    mine = client_ports(os.getpid(), workers.proxy.port) - before
    return client, workers.worker_of(mine)


@contextlib.asynccontextmanager
async def channel_on_each_worker(workers: Workers, call: Callable[[
        service_pb2_grpc.MessagingServiceStub], Any]) -> AsyncIterator[
        list[service_pb2_grpc.MessagingServiceStub]]:
    """One gRPC channel (a connection of its own) per worker: channels are opened, each
    making `call` once to connect, until every worker serves one; the others are closed."""
    kept: dict[int, tuple[grpc.aio.Channel, service_pb2_grpc.MessagingServiceStub]] = {}
    spare: list[grpc.aio.Channel] = []
    try:
        for _ in range(24):
            before = client_ports(os.getpid(), workers.proxy.port)
            channel = grpc.aio.insecure_channel(
                workers.endpoint, options=[("grpc.use_local_subchannel_pool", 1)])
            stub = service_pb2_grpc.MessagingServiceStub(channel)  # type: ignore[no-untyped-call]
            await call(stub)
            index = workers.worker_of(client_ports(os.getpid(), workers.proxy.port) - before)
            if index in kept:
                spare.append(channel)
            else:
                kept[index] = (channel, stub)
            if len(kept) == len(workers.proxy.pids):
                break
        assert len(kept) == len(workers.proxy.pids), "every connection reached one worker"
        yield [kept[i][1] for i in sorted(kept)]
    finally:
        for channel in spare + [c for c, _ in kept.values()]:
            await channel.close()

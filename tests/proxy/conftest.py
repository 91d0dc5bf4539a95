"""Fixtures: a broker in-process with its gRPC proxy (local mode), and the official 5.x client.

The official client (`rocketmq-python-client`) is synchronous and runs its own threads; the
tests call it through `asyncio.to_thread` so the broker and proxy keep serving on the test's
event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from rocketmq.v5.client.connection.rpc_client import RpcClient

from engine.broker.controller import BrokerController
from engine.client.admin.broker import BrokerAdmin
from engine.client.core.errors import ClientError
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.topic import TopicConfig
from engine.protocol.message import MessageRecord
from engine.proxy.config import ProxyConfig
from engine.proxy.local import local_proxy
from engine.proxy.server import ProxyServer
from engine.remoting.client import RemotingClient
from tests.broker.conftest import running_broker
from tests.proxy.nodejs import NodeClient, installed_client

T = TypeVar("T")

#: The proxy of the tests: any free port, message types checked (5.3's default: each test
#: creates its topic with the `message.type` it sends), short route caching.
TEST_PROXY = ProxyConfig(grpc_server_port=0, topic_route_service_cache_refresh_seconds=1)
#: The gRPC front the proxy's tests run against: the default (ours, engine/proxy/h2), or
#: grpcio's with `PROXY_FRONT=grpcio` (`make test` runs the front's own tests both ways).
FRONT = os.environ.get("PROXY_FRONT") or ProxyConfig().grpc_front


def with_front(config: ProxyConfig) -> ProxyConfig:
    """`config` served by the front the tests run against; one that asks for grpcio's keeps
    it (the tests of grpcio's join process)."""
    if config.grpc_front in (FRONT, "grpcio"):
        return config
    return dataclasses.replace(config, grpc_front=FRONT)


@dataclasses.dataclass
class Stack:
    broker: BrokerController
    proxy: ProxyServer

    @property
    def endpoint(self) -> str:
        return self.proxy.endpoint

    async def create_topic(self, topic: str, queues: int = 4,
                           message_type: str | None = None) -> None:
        """Create `topic` (with `message.type` when given: FIFO, DELAY, TRANSACTION, ...)."""
        client = RemotingClient(credentials=self.broker.access.inner_credentials())
        attributes = {"+message.type": message_type} if message_type else None
        try:
            await BrokerAdmin(client).create_topic(
                self.broker.addr, TopicConfig(topic, queues, queues), attributes=attributes)
        finally:
            await client.close()
        self.proxy.gateway.forget_route(topic)


@contextlib.asynccontextmanager
async def running_stack(tmp_path: Path, namesrv: NamesrvController,
                        proxy_config: ProxyConfig = TEST_PROXY,
                        **broker_changes: Any) -> AsyncIterator[Stack]:
    async with running_broker(tmp_path, namesrv, **broker_changes) as broker:
        proxy = local_proxy(broker, with_front(proxy_config))
        await proxy.start()
        try:
            yield Stack(broker, proxy)
        finally:
            await proxy.stop(grace=0)


@pytest.fixture
async def stack(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Stack]:
    async with running_stack(tmp_path, namesrv) as s:
        yield s


async def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking call of the official client off the event loop, in a thread whose
    current event loop is the client's own I/O loop.

    The client (rocketmq-python-client 5.x) opens its Telemetry stream with grpc.aio in the
    calling thread, which needs that loop as the thread's current one; the client sets it only
    in the thread that first opens a channel to the endpoints.  A later client started from
    another thread of to_thread's pool (a busy machine makes the pool start more) failed with
    "There is no current event loop in thread 'asyncio_1'", had no stream, and never got its
    topic's route."""
    def call() -> T:
        loop = RpcClient.get_channel_io_loop()
        if loop is not None:
            asyncio.set_event_loop(loop)
        return fn(*args, **kwargs)
    return await asyncio.to_thread(call)


async def stored(stack: Stack, topic: str, message_id: str, *,
                 timeout: float = 10.0) -> MessageRecord:
    """The record of `topic` whose UNIQ_KEY is `message_id`, once the broker has it queued
    (the consume queues are dispatched in the background, so this polls until `timeout`)."""
    deadline = asyncio.get_running_loop().time() + timeout
    client = RemotingClient(credentials=stack.broker.access.inner_credentials())
    admin = BrokerAdmin(client)
    try:
        while True:
            for queue_id in range(16):
                mq = MessageQueue(topic, stack.broker.state.config.broker_name, queue_id)
                try:
                    pulled = await admin.pull_records(stack.broker.addr, mq, 0, max_nums=64)
                except ClientError:
                    continue
                for record in pulled.records:
                    if record.properties().get("UNIQ_KEY") == message_id:
                        return record
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"message {message_id} never reached {topic}")
            await asyncio.sleep(0.05)
    finally:
        await client.close()


@pytest.fixture(scope="session")
def node_client() -> NodeClient:
    """The official Node.js client (tests/proxy/nodejs.py); the test skips where it cannot run."""
    return installed_client()

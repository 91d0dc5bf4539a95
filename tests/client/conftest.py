"""Fixtures: two name servers and a broker in-process on port 0, a `BrokerAdmin`, fake
servers; for producer/consumer tests, a broker factory, a shutdown tracker and an inbox."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest

from engine.broker.controller import BrokerController
from engine.client.admin.broker import BrokerAdmin
from engine.client.core.client_config import ClientConfig
from engine.client.core.message import MessageExt
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.topic import TopicConfig, TopicFilterType
from engine.protocol.codes import RequestCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.header.broker import CreateTopicRequestHeader
from engine.protocol.wire import to_ext
from engine.remoting.client import RemotingClient
from engine.remoting.router import RequestContext, Router
from engine.remoting.server import RemotingServer
from tests.broker.conftest import broker_configs
from tests.conftest import addr_of, namesrv_config

T = TypeVar("T")


@pytest.fixture
async def namesrv2(tmp_path: Path) -> AsyncIterator[NamesrvController]:
    controller = NamesrvController(namesrv_config(tmp_path / "ns2"))
    await controller.start()
    try:
        yield controller
    finally:
        await controller.stop()


@pytest.fixture
async def broker(tmp_path: Path, namesrv: NamesrvController,
                 namesrv2: NamesrvController) -> AsyncIterator[BrokerController]:
    """broker-a of DefaultCluster, registered on both name servers."""
    config, store = broker_configs(tmp_path, f"{addr_of(namesrv)};{addr_of(namesrv2)}")
    controller = BrokerController(config, store)
    await controller.start()
    try:
        yield controller
    finally:
        await controller.stop()


async def create_topic(broker: BrokerController, topic: str, *, queues: int = 4,
                       sys_flag: int = 0) -> None:
    """Create a topic on the broker as an admin would, then re-register it everywhere."""
    header = CreateTopicRequestHeader(topic, "TBW102", queues, queues, 6,
                                      TopicFilterType.SINGLE_TAG, False, sys_flag)
    client = RemotingClient()
    try:
        resp = await client.invoke(broker.addr, request(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                                        to_ext(header)), 10)
        assert resp.code == 0, resp.remark
    finally:
        await client.close()
    await broker.registration.register_all()


Handler = Callable[[RemotingCommand], RemotingCommand]


@pytest.fixture
async def fake_namesrv() -> AsyncIterator[Callable[[dict[int, Handler]], Awaitable[str]]]:
    """Start a server answering given codes with canned responses (an old or odd server)."""
    servers: list[RemotingServer[None]] = []

    async def start(handlers: dict[int, Handler]) -> str:
        router = Router()
        for code, answer in handlers.items():
            def handle(ctx: RequestContext[None], cmd: RemotingCommand,
                       answer: Handler = answer) -> RemotingCommand:
                return answer(cmd)
            router.handles(code)(handle)
        server: RemotingServer[None] = RemotingServer(router, None, host="127.0.0.1", port=0)
        await server.start()
        servers.append(server)
        return f"127.0.0.1:{server.port}"

    try:
        yield start
    finally:
        for server in servers:
            await server.stop()


@pytest.fixture
async def silent_server() -> AsyncIterator[str]:
    """Accepts connections and reads requests, but never answers."""
    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(4096):
            pass
        writer.close()

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def broker_admin() -> AsyncIterator[BrokerAdmin]:
    """A `BrokerAdmin` over its own client (closed after the test)."""
    client = RemotingClient()
    try:
        yield BrokerAdmin(client, timeout=5.0)
    finally:
        await client.close()


# ---------------------------------------------------------------------------- producers/consumers


BrokerFactory = Callable[..., Awaitable[BrokerController]]


@pytest.fixture
async def start_broker(tmp_path: Path,
                       namesrv: NamesrvController) -> AsyncIterator[BrokerFactory]:
    """Starts brokers registered on `namesrv` (`broker_configs` keywords, `clock=`); all are
    stopped after the test, after the producers and consumers given to `track`."""
    started: list[BrokerController] = []

    async def start(name: str = "broker-a", clock: Callable[[], int] | None = None,
                    **changes: Any) -> BrokerController:
        config, store = broker_configs(tmp_path, addr_of(namesrv), name=name, **changes)
        controller = (BrokerController(config, store) if clock is None
                      else BrokerController(config, store, clock=clock))
        await controller.start()
        started.append(controller)
        return controller

    try:
        yield start
    finally:
        for controller in reversed(started):
            await controller.stop()


class Closable(Protocol):
    async def shutdown(self) -> None: ...


@pytest.fixture
async def track(start_broker: BrokerFactory) -> AsyncIterator[Callable[[T], T]]:
    """`track(obj)` returns obj and shuts it down after the test (before the brokers stop)."""
    objects: list[Closable] = []

    def add(obj: T) -> T:
        objects.append(obj)  # type: ignore[arg-type]
        return obj

    try:
        yield add
    finally:
        for obj in reversed(objects):
            await obj.shutdown()


@pytest.fixture
def client_config(namesrv: NamesrvController) -> ClientConfig:
    return ClientConfig(namesrv_addr=addr_of(namesrv), client_ip="127.0.0.1")


async def make_topic(broker: BrokerController, topic: str, queues: int = 4) -> None:
    """Create `topic` on the broker and publish its route at once."""
    broker.state.topics.put(TopicConfig(topic, queues, queues))
    await broker.registration.register_all()


class Inbox:
    """What a listener received, awaited by count instead of by sleeping."""

    def __init__(self) -> None:
        self.messages: list[MessageExt] = []
        self._event = asyncio.Event()

    def add(self, msgs: list[MessageExt]) -> None:
        self.messages.extend(msgs)
        self._event.set()

    async def wait_for(self, count: int, timeout: float = 60.0) -> list[MessageExt]:
        """The messages once `count` came; `timeout` only bounds a test that would hang (a
        busy machine may take many seconds, so it is no measure of speed)."""
        async with asyncio.timeout(timeout):
            while len(self.messages) < count:
                self._event.clear()
                await self._event.wait()
        return self.messages

    def bodies(self) -> list[str]:
        return [m.body.decode() for m in self.messages]

"""Where clients find name servers: explicit list, NAMESRV_ADDR, or an HTTP address server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from engine.broker.controller import BrokerController
from engine.client.core.client_config import ClientConfig
from engine.client.core.message import Message
from engine.client.core.nsaddr import fetch_namesrv_addr
from engine.client.produce.producer import Producer
from engine.namesrv.controller import NamesrvController
from tests.conftest import addr_of

from .conftest import BrokerFactory, make_topic


@dataclass
class AddressServer:
    """Answers every GET with `body` (and `status`); remembers the paths asked for."""

    body: str = ""
    status: int = 200
    paths: list[str] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.paths.append(head.split()[1].decode())
        data = self.body.encode()
        writer.write(f"HTTP/1.1 {self.status} X\r\nContent-Type: text/plain\r\n"
                     f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
        await writer.drain()
        writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/rocketmq/nsaddr"


@pytest.fixture
async def address_server() -> AsyncIterator[AddressServer]:
    state = AddressServer()
    server = await asyncio.start_server(state.handle, "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def broker(start_broker: BrokerFactory) -> BrokerController:
    broker = await start_broker()
    await make_topic(broker, "FoundTopic")
    return broker


async def test_the_address_server_supplies_and_updates_the_list(
        broker: BrokerController, namesrv: NamesrvController, address_server: AddressServer,
        track: Callable[[Any], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    address_server.body = addr_of(namesrv) + "\n"
    config = ClientConfig(namesrv_domain=f"127.0.0.1:{address_server.port}",
                          client_ip="127.0.0.1")
    producer = track(Producer("FoundPG", config))
    await producer.start()
    assert address_server.paths == ["/rocketmq/nsaddr"]
    assert producer.instance.namesrv_addr == addr_of(namesrv)
    assert producer.instance.nsaddr_service.running  # refreshed every 2 minutes
    result = await producer.send(Message("FoundTopic", b"via the address server"))
    assert result.message_queue.broker_name == "broker-a"
    other = "127.0.0.1:1"
    address_server.body = f"{other};{addr_of(namesrv)}"
    assert await producer.instance.fetch_namesrv_addr() is True
    assert producer.instance.namesrv_addr == f"{other};{addr_of(namesrv)}"
    assert await producer.instance.fetch_namesrv_addr() is False  # unchanged
    # the first server is down: routes come from the next one
    assert await producer.instance.update_route("FoundTopic") is True


async def test_namesrv_addr_environment_variable(broker: BrokerController,
                                                 namesrv: NamesrvController,
                                                 track: Callable[[Any], Any],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAMESRV_ADDR", addr_of(namesrv))
    producer = track(Producer("EnvPG", ClientConfig(client_ip="127.0.0.1")))
    await producer.start()
    assert producer.instance.namesrv_addr == addr_of(namesrv)
    assert not producer.instance.nsaddr_service.running
    await producer.send(Message("FoundTopic", b"via NAMESRV_ADDR"))


async def test_bad_address_server_answers_are_ignored(address_server: AddressServer) -> None:
    address_server.status = 404
    assert await fetch_namesrv_addr(address_server.url) is None
    address_server.status, address_server.body = 200, "not an address"
    assert await fetch_namesrv_addr(address_server.url) is None
    address_server.body = "  "
    assert await fetch_namesrv_addr(address_server.url) is None
    assert await fetch_namesrv_addr("http://127.0.0.1:1/rocketmq/nsaddr", 1.0) is None
    address_server.body = "10.0.0.1:9876;10.0.0.2:9876\r\n"
    assert await fetch_namesrv_addr(address_server.url) == "10.0.0.1:9876;10.0.0.2:9876"

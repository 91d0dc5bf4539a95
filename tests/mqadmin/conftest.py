"""Fixtures: a name server and a broker serving from a background thread with its own loop,
and clients (producers, an online consumer) living on that loop.

CliRunner runs a command synchronously on the test's thread, and each command runs its own
event loop; the servers therefore live on another thread's loop, started and stopped here.
Every test gets its own mqadmin home (contexts, audit database) under tmp_path.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from engine.broker.controller import BrokerController
from engine.client.admin.broker import BrokerAdmin
from engine.client.admin.cluster import MQAdmin
from engine.client.core.results import SendResult
from engine.namesrv.controller import NamesrvController
from engine.protocol import fastjson
from engine.protocol.body.admin import (
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ConsumeStatus,
    GetConsumerStatusBody,
    ProcessQueueInfo,
)
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.body.topic import TopicConfig
from engine.protocol.codes import RequestCode
from engine.protocol.command import RemotingCommand
from engine.protocol.wire import to_json
from engine.remoting.client import RemotingClient
from engine.remoting.router import RequestContext, Router
from tests.broker.conftest import broker_configs
from tests.conftest import addr_of, namesrv_config
from tests.sending import heartbeat, send_one

T = TypeVar("T")


@pytest.fixture(autouse=True)
def mqadmin_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """mqadmin's contexts and audit database under tmp_path, nothing inherited."""
    home = tmp_path / "mqadmin-home"
    monkeypatch.setenv("MQADMIN_HOME", str(home))
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    monkeypatch.delenv("MQADMIN_CONTEXT", raising=False)
    return home


class OnlineConsumer:
    """A client online in a consumer group: it heartbeats once and answers the calls a
    broker relays (running info, status), reporting `offsets` as its queues."""

    def __init__(self, broker_addr: str, client_id: str, group: str,
                 topics: tuple[str, ...]) -> None:
        self.broker_addr = broker_addr
        self.client_id = client_id
        self.group = group
        self.topics = topics
        self.offsets: dict[MessageQueue, int] = {MessageQueue(t, "broker-a", 0): 0
                                                 for t in topics}
        self.client = RemotingClient(self._router(), None)

    def _router(self) -> Router:
        router = Router()

        @router.handles(RequestCode.GET_CONSUMER_RUNNING_INFO)
        def running(ctx: RequestContext[None], cmd: RemotingCommand) -> RemotingCommand:
            info = ConsumerRunningInfo(
                properties={"consumeType": "CONSUME_PASSIVELY", "clientId": self.client_id},
                mq_table={mq: ProcessQueueInfo(commit_offset=o, cached_msg_count=1)
                          for mq, o in self.offsets.items()},
                status_table={t: ConsumeStatus(consume_ok_tps=2.5) for t in self.topics},
                jstack="main thread" if cmd.ext("jstackEnable") == "true" else None)
            return cmd.response(body=fastjson.dumpb(to_json(info)))

        @router.handles(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT)
        def status(ctx: RequestContext[None], cmd: RemotingCommand) -> RemotingCommand:
            body = GetConsumerStatusBody(dict(self.offsets))
            return cmd.response(body=fastjson.dumpb(to_json(body)))

        @router.handles(RequestCode.CONSUME_MESSAGE_DIRECTLY)
        def consume(ctx: RequestContext[None], cmd: RemotingCommand) -> RemotingCommand:
            result = ConsumeMessageDirectlyResult(consume_result=CMResult.CR_SUCCESS,
                                                  remark=f"{len(cmd.body or b'')} bytes",
                                                  spent_time_mills=2)
            return cmd.response(body=fastjson.dumpb(to_json(result)))

        @router.handles(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                        RequestCode.RESET_CONSUMER_CLIENT_OFFSET)
        def ignore(ctx: RequestContext[None], cmd: RemotingCommand) -> None:
            return None

        return router

    async def start(self) -> None:
        await heartbeat(self.client, self.broker_addr, self.client_id,
                        consumer_group=self.group, topics=self.topics)

    async def stop(self) -> None:
        await self.client.close()


class BackgroundCluster:
    """One name server and broker-a (DefaultCluster) on a private event loop thread."""

    def __init__(self, root: Path, **broker_changes: Any) -> None:
        self.root = root
        self.broker_changes = broker_changes
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="cluster-loop",
                                       daemon=True)
        self.namesrv: NamesrvController | None = None
        self.broker: BrokerController | None = None
        self.client: RemotingClient | None = None
        self.consumers: list[OnlineConsumer] = []

    @property
    def ns(self) -> str:
        assert self.namesrv is not None
        return addr_of(self.namesrv)

    @property
    def broker_addr(self) -> str:
        assert self.broker is not None
        return self.broker.addr

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        """Run `coro` on the cluster's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> None:
        self.thread.start()
        self.call(self._start())

    async def _start(self) -> None:
        self.namesrv = NamesrvController(namesrv_config(self.root / "ns"))
        await self.namesrv.start()
        config, store = broker_configs(self.root, self.ns, **self.broker_changes)
        self.broker = BrokerController(config, store)
        await self.broker.start()
        self.client = RemotingClient()

    def stop(self) -> None:
        try:
            self.call(self._stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()

    async def _stop(self) -> None:
        for consumer in self.consumers:
            await consumer.stop()
        if self.client is not None:
            await self.client.close()
        if self.broker is not None:
            await self.broker.stop()
        if self.namesrv is not None:
            await self.namesrv.stop()

    # ------------------------------------------------------------------------ set-up

    def admin_call(self, work: Any) -> Any:
        """Run ``work(admin)`` with an `MQAdmin` over this name server (checks state)."""
        async def run() -> Any:
            async with MQAdmin(self.ns) as admin:
                return await work(admin)
        return self.call(run())

    def create_topic(self, topic: str, *, queues: int = 4) -> None:
        async def create(admin: MQAdmin) -> None:
            await admin.broker.create_topic(self.broker_addr, TopicConfig(topic, queues, queues))
        self.admin_call(create)

    def create_group(self, group: str, **settings: Any) -> None:
        async def create(admin: MQAdmin) -> None:
            await admin.broker.create_group(self.broker_addr,
                                            SubscriptionGroupConfig(group, **settings))
        self.admin_call(create)

    def send(self, topic: str, body: bytes = b"hello", *, queue_id: int = 0,
             tags: str | None = None, keys: str | None = None) -> SendResult:
        assert self.client is not None
        return self.call(send_one(self.client, self.broker_addr, "broker-a", topic, body,
                                  queue_id=queue_id, tags=tags, keys=keys))

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        assert self.client is not None
        admin = BrokerAdmin(self.client)
        self.call(admin.update_consumer_offset(self.broker_addr, group, topic, queue_id,
                                               offset))

    def consumer_online(self, group: str, topics: tuple[str, ...],
                        client_id: str = "127.0.0.1@test") -> OnlineConsumer:
        consumer = OnlineConsumer(self.broker_addr, client_id, group, topics)
        self.call(consumer.start())
        self.consumers.append(consumer)
        return consumer

    def producer_online(self, group: str, client_id: str = "127.0.0.1@producer") -> None:
        assert self.client is not None
        self.call(heartbeat(self.client, self.broker_addr, client_id, producer_group=group))


def start_cluster(root: Path, **broker_changes: Any) -> BackgroundCluster:
    running = BackgroundCluster(root, **broker_changes)
    try:
        running.start()
    except BaseException:
        running.stop()
        raise
    return running


@contextlib.contextmanager
def two_clusters(root: Path) -> Iterator[tuple[BackgroundCluster, BackgroundCluster]]:
    """Two background clusters (under root/a and root/b), stopped after."""
    first = start_cluster(root / "a")
    try:
        second = start_cluster(root / "b")
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[BackgroundCluster]:
    running = start_cluster(tmp_path)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def short_retries(tmp_path: Path) -> Iterator[BackgroundCluster]:
    """A background cluster whose delay levels are 1 s each: retries come back at once."""
    running = start_cluster(tmp_path, message_delay_level="1s 1s 1s 1s 1s")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[BackgroundCluster]:
    """A background cluster with traceTopicEnable and the topic Orders."""
    running = start_cluster(tmp_path, trace_topic_enable=True)
    try:
        running.create_topic("Orders")  # trace_helpers.TOPIC
        yield running
    finally:
        running.stop()

"""The demo traffic's gRPC group (`mqadmin.dev.traffic --grpc`) through our proxy, whose
settings answer says metrics off as Apache 5.3.3's does: the official 5.x PushConsumer it
builds consumes, and its telemetry reader no longer fails on the settings answer."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from engine.namesrv.controller import NamesrvController
from engine.proxy.config import ProxyConfig
from mqadmin.dev.traffic import Counts, grpc_consumer
from tests.proxy.conftest import in_thread, running_stack
from tests.proxy.official import ClientConfiguration, Credentials, Message, Producer

PROXY = ProxyConfig(grpc_server_port=0, topic_route_service_cache_refresh_seconds=1,
                    grpc_client_consumer_max_long_polling_timeout_millis=3000)


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(record.getMessage())


async def test_grpc_group_starts_and_consumes_with_metrics_off(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    errors = _Errors()
    client_log = logging.getLogger("rocketmq-python-client")  # the 5.x client's own logger
    client_log.addHandler(errors)
    counts = Counts()
    async with running_stack(tmp_path, namesrv, PROXY) as stack:
        await stack.create_topic("DemoPayments")
        consumer = grpc_consumer(stack.endpoint, counts)
        assert consumer is not None
        await in_thread(consumer.startup)
        try:
            producer = Producer(ClientConfiguration(stack.endpoint, Credentials()),
                                ("DemoPayments",))
            await in_thread(producer.startup)
            try:
                msg = Message()
                msg.topic, msg.body = "DemoPayments", b"paid"
                await in_thread(producer.send, msg)
            finally:
                await in_thread(producer.shutdown)
            deadline = time.monotonic() + 60
            while counts.grpc_consumed < 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.2)  # the client consumes in its own threads
        finally:
            await in_thread(consumer.shutdown)
            client_log.removeHandler(errors)
    assert counts.grpc_consumed == 1
    # (its shutdown interrupts the pending receive, which it logs as an error: not counted)
    assert not [e for e in errors.seen if "get_meter" in e], errors.seen

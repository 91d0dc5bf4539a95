"""Webhook delivery against a real local HTTP server: retries with backoff, a dead webhook
costs only a failed delivery, a refusing one is not retried."""

from __future__ import annotations

import asyncio

from mqadmin.operations.lag.alerts import Webhooks
from tests.conftest import closed_port_addr
from tests.lag.webhook_server import WebhookServer


async def test_retries_until_delivered() -> None:
    with WebhookServer(fail_first=2) as hook:
        hooks = Webhooks([hook.url], retries=3, backoff=0.01)
        [delivery] = await hooks.post({"event": "x", "n": 1})
        assert delivery.ok and delivery.attempts == 3
        assert (await asyncio.to_thread(hook.take, "x"))["n"] == 1


async def test_dead_webhook_fails_quietly_and_submit_never_waits() -> None:
    dead = f"http://{closed_port_addr()}/hook"
    hooks = Webhooks([dead], retries=2, backoff=0.01)
    [delivery] = await hooks.post({"event": "x"})
    assert not delivery.ok and delivery.attempts == 3 and "Connect" in delivery.detail
    hooks.start()
    for i in range(50):
        hooks.submit({"event": "y", "i": i})  # returns at once, whatever the webhook does
    await hooks.stop(drain=0.05)
    assert hooks.delivered == 0 and hooks.failed >= 1


async def test_refused_event_is_not_retried() -> None:
    with WebhookServer(fail_first=10, fail_status=400) as hook:
        hooks = Webhooks([hook.url], retries=3, backoff=0.01)
        [delivery] = await hooks.post({"event": "x"})
        assert not delivery.ok and delivery.attempts == 1 and delivery.detail == "HTTP 400"

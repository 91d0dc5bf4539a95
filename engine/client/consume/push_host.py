"""What a push consumer's pull loops and consume services use of it (`PushHost`).

How this works: `PushConsumer` owns its `PullLoop`s and its consume service and hands each
itself; they see it through this protocol, so they need not import `push_consumer` (which
imports them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol

from engine.client.consume.consume_from import StartOffsets
from engine.client.consume.consumer_options import ConsumerOptions
from engine.client.consume.offset_store import OffsetStore
from engine.client.consume.process_queue import ProcessQueue
from engine.client.consume.rebalance import Rebalancer
from engine.client.core.instance import ClientInstance
from engine.client.core.message import MessageExt
from engine.protocol.body.heartbeat import SubscriptionData
from engine.protocol.body.message_queue import MessageQueue


class PushHost(Protocol):
    group: str
    instance: ClientInstance
    options: ConsumerOptions
    offset_store: OffsetStore
    rebalancer: Rebalancer
    start_offsets: StartOffsets
    stopping: bool
    paused: bool

    @property
    def orderly(self) -> bool:
        """Whether the listener is an orderly one."""

    def spawn(self, coro: Coroutine[Any, Any, Any], *, work: bool = False
              ) -> asyncio.Task[Any]:
        """Run `coro` in the background (`work`: waited for at shutdown)."""

    def thresholds(self, topic: str) -> tuple[int, int]:
        """(message count, MiB) a queue of `topic` may cache before its pulls pause."""

    def subscription_of(self, topic: str) -> SubscriptionData | None:
        """The subscription a pull of `topic` carries."""

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
               dispatch: bool) -> None:
        """Hand pulled messages to the consume service."""

    async def remove_process_queue(self, mq: MessageQueue) -> None:
        """Stop holding `mq` (its offset persisted, its queue dropped)."""

    async def lock_one(self, mq: MessageQueue, pq: ProcessQueue | None = None) -> bool:
        """Lock `mq` at its broker (orderly consumption)."""

    async def lock_all(self) -> None:
        """Lock every held queue at its broker (orderly consumption)."""

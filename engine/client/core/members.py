"""What a client instance needs from the producers and consumers registered with it, and what
its callbacks need from the instance."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from engine.client.core.message import Message
from engine.protocol.body.admin import ConsumeMessageDirectlyResult, ConsumerRunningInfo
from engine.protocol.body.heartbeat import ConsumerData, SubscriptionData
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.command import RemotingCommand
from engine.remoting.connection import Connection


class ProducerMember(Protocol):
    group: str

    def publish_topics(self) -> Iterable[str]:
        """Topics whose routes the instance keeps fresh for this producer."""

    async def check_transaction_state(self, conn: Connection, cmd: RemotingCommand) -> None:
        """Answer a broker's CHECK_TRANSACTION_STATE (transaction producers only)."""


class ConsumerMember(Protocol):
    group: str

    def consumer_data(self) -> ConsumerData:
        """This consumer's entry in HEART_BEAT."""

    def subscriptions(self) -> Iterable[SubscriptionData]:
        """Every subscription, ``%RETRY%<group>`` included."""

    async def rebalance(self) -> None:
        """One rebalance round over every subscribed topic."""

    async def persist_offsets(self) -> None:
        """Send (or write) the offsets of the queues this consumer holds."""

    def running_info(self) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO."""

    async def consume_directly(self, msg: bytes, broker_name: str | None
                               ) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY: run the listener on one stored record."""

    async def reset_offsets(self, topic: str, table: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: drop the topic's queues, restart from `table`."""


class InnerProducer(Protocol):
    """The instance's own producer (group CLIENT_INNER_PRODUCER) that consumers resend
    through; made by them (`send_back.inner_producer`), shut down by the instance."""

    async def start(self) -> None: ...

    async def send(self, msg: Message) -> object: ...

    async def shutdown(self) -> None: ...


class Members(Protocol):
    """What the requests brokers send reach (`callbacks.py`): a client instance's members."""

    producers: dict[str, ProducerMember]
    consumers: dict[str, ConsumerMember]

    def rebalance_now(self) -> None:
        """Wake the rebalance Service."""

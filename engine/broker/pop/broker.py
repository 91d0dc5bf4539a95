"""`PopBroker`: what POP uses of its broker (`BrokerState` is one), and no more.

`PopService` and the revive service read the broker through it; the popper and the acker are
handed only the few tables and callables they use.  Members are read each time (the settings
are replaced by UPDATE_BROKER_CONFIG, the role by a switchover), never copied at start.
"""

from __future__ import annotations

from typing import Protocol

from engine.broker.config import BrokerConfig
from engine.broker.groups import SubscriptionGroupManager
from engine.broker.offsets import ConsumerOffsetManager
from engine.broker.stats import BrokerStats
from engine.broker.topics import TopicConfigManager
from engine.protocol.message import Address
from engine.store.config import MessageStoreConfig
from engine.store.message_store import MessageStore


class PopBroker(Protocol):
    @property
    def config(self) -> BrokerConfig: ...

    @property
    def store_config(self) -> MessageStoreConfig: ...

    @property
    def store(self) -> MessageStore: ...

    @property
    def offsets(self) -> ConsumerOffsetManager: ...

    @property
    def topics(self) -> TopicConfigManager: ...

    @property
    def groups(self) -> SubscriptionGroupManager: ...

    @property
    def stats(self) -> BrokerStats: ...

    @property
    def store_host(self) -> Address: ...

    @property
    def is_slave(self) -> bool: ...

    def clock(self) -> int: ...

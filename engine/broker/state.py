"""`BrokerState`: everything a broker's request handlers work on, in one place."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from engine.broker.clients import ConsumerManager, ProducerManager
from engine.broker.config import BrokerConfig
from engine.broker.delay_levels import ScheduleMessageService
from engine.broker.groups import SubscriptionGroupManager
from engine.broker.locks import RebalanceLockManager
from engine.broker.offsets import ConsumerOffsetManager
from engine.broker.pop.service import PopService
from engine.broker.stats import BrokerStats
from engine.broker.timer import TimerService
from engine.broker.topics import TopicConfigManager
from engine.ha.client import HAClient
from engine.ha.master import HAService
from engine.protocol.body.topic import DataVersion
from engine.protocol.perm import is_readable, is_writeable
from engine.remoting.client import RemotingClient
from engine.store.config import BrokerRole, MessageStoreConfig
from engine.store.message_store import MessageStore

if TYPE_CHECKING:
    from engine.broker.access import BrokerAccess
    from engine.broker.controller_mode import ControllerModeService
    from engine.broker.role import RoleManager


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class BrokerState:
    """Managers, store and settings of one broker; handlers reach it as ``ctx.state``."""

    def __init__(self, config: BrokerConfig, store_config: MessageStoreConfig,
                 *, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.config = config
        self.store_config = store_config
        self.clock = clock
        self.boot_timestamp = clock()
        self.store = MessageStore(store_config, store_host=(config.broker_ip1, config.listen_port),
                                  clock=clock)
        files = self.store.config_files
        self.topics = TopicConfigManager(config, files, clock=clock)
        self.groups = SubscriptionGroupManager(
            files, auto_create=config.auto_create_subscription_group, clock=clock)
        self.offsets = ConsumerOffsetManager(files)
        self.schedule = ScheduleMessageService(self.store, clock, lambda: not self.is_slave)
        self.timer = TimerService(self.store, clock, lambda: not self.is_slave)
        self.consumers = ConsumerManager(clock, notify_enabled=self._notify_enabled)
        self.producers = ProducerManager(clock)
        self.locks = RebalanceLockManager(clock)
        self.stats = BrokerStats()
        #: 5.x POP: checkpoints, revive, FIFO order info, held pops (docs/pop.md).
        self.pop = PopService(self)
        #: Outbound calls: name servers, and (as a slave) the master.
        self.client = RemotingClient()
        #: What a slave learned from the name servers' answers.
        self.master_addr: str | None = None
        self.ha_master_addr: str | None = None
        #: Replication: the HA port's service (every role) and, on a slave, its client.
        self.ha: HAService | None = None
        self.ha_client: HAClient | None = None
        self.roles: RoleManager | None = None
        #: Registers this broker on every name server now and returns when they answered
        #: (set by the controller): a topic creation answers after it, as in Apache.
        self.register_now: Callable[[], Awaitable[object]] | None = None
        #: Under a 5.3 controller (enableControllerMode): its link, set by the controller.
        self.controller_mode: ControllerModeService | None = None
        #: Access control (users, rules, the request guard); set by the controller.
        self.access: BrokerAccess | None = None
        #: Offsets consumers committed to this broker while it was a slave, by
        #: (group, topic, queue id): the slave sync hands them to the master.
        self.slave_commits: dict[tuple[str, str, int], int] = {}
        #: The broker.conf this broker was started with; UPDATE_BROKER_CONFIG writes there.
        self.config_file: str | None = None
        #: Version of the settings (4.9.7 `Configuration.dataVersion`), bumped by each update.
        self.config_version = DataVersion(timestamp=self.boot_timestamp)

    def replace_config(self, config: BrokerConfig) -> None:
        """Adopt new settings (UPDATE_BROKER_CONFIG) where managers keep a copy of them."""
        self.config = config
        self.topics.broker = config
        self.groups.auto_create = config.auto_create_subscription_group
        if self.access is not None:
            self.access.reconfigure(config)

    def _notify_enabled(self, group: str) -> bool:
        if not self.config.notify_consumer_ids_changed_enable:
            return False
        sub = self.groups.get(group)
        return sub is None or sub.notify_consumer_ids_changed_enable

    # ------------------------------------------------------------------ role and perms

    @property
    def is_slave(self) -> bool:
        return self.store_config.broker_role is BrokerRole.SLAVE

    @property
    def writable(self) -> bool:
        return is_writeable(self.config.broker_permission) and not self.is_slave

    @property
    def readable(self) -> bool:
        return is_readable(self.config.broker_permission)

    @property
    def ha_server_addr(self) -> str:
        """Where slaves reach this broker's HA port (the bound port once listening)."""
        cfg = self.config
        if self.ha is not None and self.ha.port:
            return f"{cfg.broker_ip2 or cfg.broker_ip1}:{self.ha.port}"
        return cfg.ha_server_addr

    @property
    def store_host(self) -> tuple[str, int]:
        return (self.config.broker_ip1, self.config.listen_port)

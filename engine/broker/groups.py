"""`SubscriptionGroupManager`: consumer group configs and subscriptionGroup.json."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from engine.broker.persist import Persister
from engine.protocol.body.subscription import SubscriptionGroupConfig, SubscriptionGroupWrapper
from engine.protocol.body.topic import DataVersion
from engine.store.config_files import ConfigFiles

log = logging.getLogger(__name__)

#: Groups every 4.9.7 broker creates at start (`SubscriptionGroupManager.init`).
BUILTIN_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP",
                  "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION",
                  "CID_ONSAPI_OWNER")


class SubscriptionGroupManager:
    def __init__(self, files: ConfigFiles, *, auto_create: bool,
                 clock: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.auto_create = auto_create
        self.clock = clock
        self.table: dict[str, SubscriptionGroupConfig] = {
            name: SubscriptionGroupConfig(name) for name in BUILTIN_GROUPS}
        self.data_version = DataVersion()
        self.files = files
        self._persister = Persister(self.wrapper, files.save_subscription_groups,
                                    "subscriptionGroup.json")

    def load(self) -> None:
        """Read subscriptionGroup.json (or its .bak).

        Raises:
            ConfigFileError: the file exists but cannot be decoded.
        """
        wrapper = self.files.load_subscription_groups()
        if wrapper is None:
            return
        self.table.update(wrapper.subscription_group_table)
        self.data_version = wrapper.data_version

    def flush(self) -> None:
        self._persister.flush()

    async def wait_persisted(self) -> None:
        await self._persister.wait()

    def wrapper(self) -> SubscriptionGroupWrapper:
        return SubscriptionGroupWrapper(dict(self.table), self.data_version)

    def _changed(self) -> None:
        self.data_version = self.data_version.next(self.clock())
        self._persister.request()

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self.table.get(group)

    def find_or_create(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, auto-created when autoCreateSubscriptionGroup allows it."""
        config = self.table.get(group)
        if config is None and self.auto_create:
            config = self.put(SubscriptionGroupConfig(group))
        return config

    def put(self, config: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        old = self.table.get(config.group_name)
        self.table[config.group_name] = config
        log.info("subscription group %s: %s", "changed" if old else "created", config)
        self._changed()
        return config

    def delete(self, group: str) -> SubscriptionGroupConfig | None:
        old = self.table.pop(group, None)
        if old is not None:
            log.info("subscription group deleted: %s", group)
            self._changed()
        return old

    def replace_all(self, wrapper: SubscriptionGroupWrapper) -> None:
        """A slave's copy of its master's groups (metadata sync)."""
        self.table = dict(wrapper.subscription_group_table)
        self.data_version = wrapper.data_version
        self._persister.request()

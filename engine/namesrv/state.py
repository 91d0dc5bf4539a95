"""`NamesrvState`: what the name server's request handlers share (config, routes, KV)."""

from __future__ import annotations

import asyncio
import logging
import os

from engine.common import config as configlib
from engine.common import properties
from engine.namesrv.config import NamesrvConfig
from engine.namesrv.epochs import EpochTable
from engine.namesrv.kvconfig import KVConfigManager
from engine.namesrv.routes import Clock, RouteTable, wall_clock_ms

log = logging.getLogger("engine.namesrv")


class RouteBodyCache:
    """Encoded route bodies by (topic, standard JSON?, order conf), valid for one generation
    of the route tables: routes are read far more often than they change."""

    def __init__(self) -> None:
        self.generation = -1
        self.bodies: dict[tuple[str, bool, str | None], bytes] = {}

    def reset(self, generation: int) -> None:
        self.generation = generation
        self.bodies.clear()


class NamesrvState:
    """Mutable server state; handlers run on the event loop and never block it."""

    def __init__(self, config: NamesrvConfig, *, clock: Clock = wall_clock_ms,
                 extra_properties: dict[str, str] | None = None) -> None:
        self.config = config
        self.routes = RouteTable(clock, config.broker_channel_expired_time)
        self.kv = KVConfigManager(config.kv_config_path)
        self.route_bodies = RouteBodyCache()
        #: Master epochs per broker name (HA fencing of returning stale masters).
        self.epochs = EpochTable()
        #: Keys of the ``-c`` file that NamesrvConfig does not know: 4.9.7 keeps them in its
        #: Configuration, shows them in GET_NAMESRV_CONFIG and lets UPDATE change them.
        self.extra_properties = dict(extra_properties or {})

    async def persist_kv(self) -> None:
        """Write kvConfig.json in a worker thread (the fsync must not stall the loop)."""
        seq, data = self.kv.snapshot()
        try:
            await asyncio.to_thread(self.kv.write, seq, data)
        except OSError as exc:
            log.error("persist KV config to %s failed: %s", self.kv.path, exc)

    def all_config_items(self) -> list[tuple[str, str]]:
        pairs = [(k, v) for k, v in configlib.items(self.config) if v is not None]
        return pairs + list(self.extra_properties.items())

    def config_text(self) -> str:
        """All settings as ``key=value`` lines, unescaped, as `MixAll.properties2String`."""
        return properties.dumps(self.all_config_items(), escape=False)

    def update_config(self, props: dict[str, str]) -> list[str]:
        """Apply known keys (like 4.9.7's `Configuration.update`); returns ignored keys.

        Raises:
            ConfigError: a known key holds a bad value (nothing is changed then).
        """
        known = set(configlib.keys(NamesrvConfig))
        ours = {k: v for k, v in props.items() if k in known}
        self.config, _ = configlib.load(NamesrvConfig, ours, base=self.config)
        ignored = []
        for key, value in props.items():
            if key in self.extra_properties:
                self.extra_properties[key] = value
            elif key not in known:
                ignored.append(key)
        self.routes.expiry_ms = self.config.broker_channel_expired_time
        return ignored

    async def persist_config(self) -> None:
        """Write all settings to configStorePath (4.9.7 does so after every update)."""
        path = self.config.config_store_path
        text = self.config_text()

        def write() -> None:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            tmp = f"{path}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)

        try:
            await asyncio.to_thread(write)
        except OSError as exc:
            log.error("persist name server config to %s failed: %s", path, exc)

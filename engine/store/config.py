"""Store configuration: RocketMQ's MessageStoreConfig keys, defaults and path helpers."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from enum import Enum, StrEnum
from typing import Any

from engine.store.delay_levels import parse_delay_levels
from engine.store.errors import StoreConfigError


class FlushDiskType(StrEnum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class BrokerRole(StrEnum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


def _home_store() -> str:
    return os.path.join(os.path.expanduser("~"), "store")


@dataclass(slots=True)
class MessageStoreConfig:
    """MessageStoreConfig.  Field `foo_bar` is RocketMQ key `fooBar` (see `from_properties`)."""

    store_path_root_dir: str = field(default_factory=_home_store)
    store_path_commit_log: str = ""  # "" = <root>/commitlog
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    flush_interval_commit_log: int = 500  # ms
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000  # ms
    flush_interval_consume_queue: int = 1000  # ms
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000  # ms
    sync_flush_timeout: int = 5000  # ms
    file_reserved_time: int = 72  # hours
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75  # percent
    disk_space_warning_level_ratio: int = 90  # percent (0.90 in 4.9.7's system property)
    disk_space_clean_forcibly_ratio: int = 85  # percent
    clean_file_forcibly_enable: bool = True
    clean_resource_interval: int = 10_000  # ms
    delete_physic_files_interval: int = 100  # ms (deleteCommitLogFilesInterval)
    delete_consume_queue_files_interval: int = 100  # ms
    destroy_maped_file_interval_forcibly: int = 120_000  # ms
    redelete_hanged_file_interval: int = 120_000  # ms
    max_message_size: int = 4 * 1024 * 1024
    access_message_in_memory_max_ratio: int = 40  # percent of RAM
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    check_crc_on_recover: bool = True
    message_index_enable: bool = True
    message_index_safe: bool = False
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    max_msgs_num_batch: int = 64  # query results cap
    warm_mapped_file_enable: bool = False  # warmMapedFileEnable: pre-fault segments
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    default_query_max_num: int = 32
    # ---- timer messages (5.x MessageStoreConfig timer* keys; see docs/timers.md)
    timer_wheel_enable: bool = True
    timer_precision_ms: int = 1000
    timer_max_delay_sec: int = 3600 * 24 * 3
    mapped_file_size_timer_log: int = 100 * 1024 * 1024
    timer_flush_interval_ms: int = 1000
    timer_congest_num_each_slot: int = 2**31 - 1
    timer_roll_window_slot: int = 3600 * 24 * 2  # accepted; the wheel never rolls (docs)

    # ---- paths (StorePathConfigHelper)
    @property
    def commit_log_dir(self) -> str:
        return self.store_path_commit_log or os.path.join(self.store_path_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "consumequeue")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "index")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "checkpoint")

    @property
    def abort_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "abort")

    @property
    def lock_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "lock")

    @property
    def config_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "config")

    @property
    def timer_log_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "timerlog")

    @property
    def timer_wheel_path(self) -> str:
        return os.path.join(self.store_path_root_dir, "timerwheel")

    @property
    def timer_checkpoint_path(self) -> str:
        return os.path.join(self.config_dir, "timercheck")

    def delay_level_table(self) -> dict[int, int]:
        """Delay level (1-based) -> delay in ms, from `message_delay_level`."""
        return parse_delay_levels(self.message_delay_level)

    # ---- properties
    @classmethod
    def from_properties(cls, props: dict[str, str]) -> tuple[MessageStoreConfig, list[str]]:
        """Build a config from RocketMQ `key=value` properties.

        Returns:
            The config and the keys that are not store keys (for the caller to warn about).

        Raises:
            StoreConfigError: a value that cannot be converted to the field's type.
        """
        cfg = cls()
        unknown = cfg.update(props)
        return cfg, unknown

    def update(self, props: dict[str, str]) -> list[str]:
        """Apply RocketMQ-named properties; return the keys that are not store keys."""
        by_key = {rocketmq_key(f.name): f for f in fields(self)}
        unknown: list[str] = []
        for key, raw in props.items():
            f = by_key.get(ALIASES.get(key, key))
            if f is None:
                unknown.append(key)
                continue
            setattr(self, f.name, _convert(f.name, getattr(self, f.name), raw))
        self.delay_level_table()  # a bad messageDelayLevel is a config error, not a late crash
        return unknown

    def to_properties(self) -> dict[str, str]:
        """Every key with its RocketMQ name, as text (for `-p` printing)."""
        out: dict[str, str] = {}
        for f in fields(self):
            v: Any = getattr(self, f.name)
            if isinstance(v, Enum):
                v = v.value
            elif isinstance(v, bool):
                v = str(v).lower()
            out[rocketmq_key(f.name)] = str(v)
        return out


# Old or alternative spellings accepted in broker.conf.
ALIASES = {
    "mapedFileSizeCommitLog": "mappedFileSizeCommitLog",
    "mapedFileSizeConsumeQueue": "mappedFileSizeConsumeQueue",
    "deleteCommitLogFilesInterval": "deletePhysicFilesInterval",
    "destroyMappedFileIntervalForcibly": "destroyMapedFileIntervalForcibly",
    "warmMappedFileEnable": "warmMapedFileEnable",
}
# Fields whose RocketMQ key is not the plain camelCase of their name.
KEY_OVERRIDES = {
    "check_crc_on_recover": "checkCRCOnRecover",
    "warm_mapped_file_enable": "warmMapedFileEnable",
}


def rocketmq_key(name: str) -> str:
    """The RocketMQ key of field `name` (camelCase, with RocketMQ's spellings)."""
    return KEY_OVERRIDES.get(name) or re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), name)


def _convert(name: str, current: Any, raw: str) -> Any:
    text = raw.strip()
    try:
        if isinstance(current, Enum):
            return type(current)(text)
        if isinstance(current, bool):
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if isinstance(current, int):
            if name in ("disk_space_warning_level_ratio", "disk_space_clean_forcibly_ratio"):
                # 4.9.7 takes these as fractions ("0.90"), 5.x as percents ("90").
                value = float(text)
                return round(value * 100) if value <= 1.0 else int(value)
            return int(text)
        return text
    except ValueError:
        raise StoreConfigError(f"{rocketmq_key(name)}={raw!r} is not a valid value") from None

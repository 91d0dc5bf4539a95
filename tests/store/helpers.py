"""Helpers of the store tests: tiny configs, messages, a settable clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.protocol.message import BrokerMessage, properties_to_string
from engine.store import MessageStoreConfig

SMALL = {
    "mapped_file_size_commit_log": 4096,
    "mapped_file_size_consume_queue": 20 * 16,
    "max_hash_slot_num": 64,
    "max_index_num": 256,
    "delete_physic_files_interval": 0,
    "warm_mapped_file_enable": False,
}


class Clock:
    """A settable millisecond clock."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def small_config(root: Path, **overrides: Any) -> MessageStoreConfig:
    values = {**SMALL, **overrides}
    return MessageStoreConfig(store_path_root_dir=str(root), **values)


def msg(
    i: int, topic: str = "TopicTest", queue_id: int = 0, size: int = 100, tags: str = "TagA",
    **props: str,
) -> BrokerMessage:  # fmt: skip
    body = (f"{i:08d}".encode() * (size // 8 + 1))[:size]
    p = {"TAGS": tags, "KEYS": f"key{i} common", "UNIQ_KEY": f"UNIQ{i:08d}", **props}
    return BrokerMessage(
        topic, body, queue_id=queue_id, properties=properties_to_string(p),
        born_timestamp=1_700_000_000_000 + i, born_host=("10.0.0.2", 5000),
    )  # fmt: skip

"""Store config: RocketMQ key names, aliases, conversions, paths."""

from __future__ import annotations

import pytest

from engine.store import FlushDiskType, MessageStoreConfig
from engine.store.errors import StoreConfigError


def test_from_properties_with_rocketmq_keys() -> None:
    cfg, unknown = MessageStoreConfig.from_properties({
        "storePathRootDir": "/data/store", "mapedFileSizeCommitLog": "4096",
        "mappedFileSizeConsumeQueue": "6000", "flushDiskType": "SYNC_FLUSH",
        "fileReservedTime": "48", "deleteWhen": "04;16", "diskMaxUsedSpaceRatio": "80",
        "diskSpaceWarningLevelRatio": "0.95", "diskSpaceCleanForciblyRatio": "88",
        "checkCRCOnRecover": "false", "brokerName": "b", "destroyMapedFileIntervalForcibly": "5",
    })  # fmt: skip
    assert unknown == ["brokerName"]
    assert cfg.mapped_file_size_commit_log == 4096 and cfg.mapped_file_size_consume_queue == 6000
    assert cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert (cfg.file_reserved_time, cfg.delete_when) == (48, "04;16")
    assert (cfg.disk_space_warning_level_ratio, cfg.disk_space_clean_forcibly_ratio) == (95, 88)
    assert cfg.check_crc_on_recover is False and cfg.destroy_maped_file_interval_forcibly == 5
    assert cfg.commit_log_dir == "/data/store/commitlog"
    assert cfg.consume_queue_dir == "/data/store/consumequeue"
    props = cfg.to_properties()
    assert props["mappedFileSizeCommitLog"] == "4096" and props["flushDiskType"] == "SYNC_FLUSH"
    assert props["checkCRCOnRecover"] == "false"
    with pytest.raises(StoreConfigError, match="fileReservedTime"):
        MessageStoreConfig.from_properties({"fileReservedTime": "soon"})


def test_defaults_match_rocketmq() -> None:
    cfg = MessageStoreConfig()
    assert cfg.mapped_file_size_commit_log == 1 << 30
    assert cfg.mapped_file_size_consume_queue == 6_000_000
    assert cfg.max_message_size == 4 * 1024 * 1024
    assert (cfg.file_reserved_time, cfg.delete_when) == (72, "04")
    assert cfg.disk_max_used_space_ratio == 75
    assert cfg.delay_level_table()[18] == 2 * 3_600_000
    assert cfg.flush_disk_type is FlushDiskType.ASYNC_FLUSH

"""Config JSON files: RocketMQ's shapes, atomic replacement, .bak fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.protocol.body.subscription import SubscriptionGroupConfig, SubscriptionGroupWrapper
from engine.protocol.body.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from engine.store.config_files import ConfigFiles, JsonConfigFile
from engine.store.errors import ConfigFileError


def test_shapes_match_rocketmq(tmp_path: Path) -> None:
    files = ConfigFiles(str(tmp_path / "config"))
    files.save_consumer_offsets({"%RETRY%CG@CG": {0: 3}, "TopicTest@CG": {0: 10, 1: 12}})
    text = (tmp_path / "config" / "consumerOffset.json").read_text()
    assert text == (
        '{\n\t"offsetTable":{\n\t\t"%RETRY%CG@CG":{0:3\n\t\t},\n'
        '\t\t"TopicTest@CG":{0:10,1:12\n\t\t}\n\t}\n}'
    )
    files.save_topics(TopicConfigSerializeWrapper({"TopicTest": TopicConfig("TopicTest", 4, 4)},
                                                  DataVersion(1700000000000, 2)))
    text = (tmp_path / "config" / "topics.json").read_text()
    assert '\t\t"TopicTest":{\n\t\t\t"order":false,\n\t\t\t"perm":6,' in text
    assert '"topicFilterType":"SINGLE_TAG"' in text and '"counter":2' in text
    loaded = files.load_topics()
    assert loaded is not None
    assert loaded.data_version == DataVersion(1700000000000, 2)
    assert loaded.topic_config_table["TopicTest"] == TopicConfig("TopicTest", 4, 4)
    assert files.load_consumer_offsets()["TopicTest@CG"] == {0: 10, 1: 12}
    files.save_delay_offsets({1: 2, 3: 5})
    assert (tmp_path / "config" / "delayOffset.json").read_text() == (
        '{\n\t"offsetTable":{1:2,3:5\n\t}\n}'
    )
    assert files.load_delay_offsets() == {1: 2, 3: 5}
    files.save_subscription_groups(SubscriptionGroupWrapper({"CG": SubscriptionGroupConfig("CG")},
                                                            DataVersion(1, 1)))
    groups = files.load_subscription_groups()
    assert groups is not None
    assert groups.subscription_group_table["CG"] == SubscriptionGroupConfig("CG")


def test_atomic_write_keeps_bak_and_falls_back(tmp_path: Path) -> None:
    f = JsonConfigFile(str(tmp_path / "x.json"))
    assert f.load() is None
    f.persist({"offsetTable": {1: 1}})
    f.persist({"offsetTable": {1: 2}})
    assert f.load() == {"offsetTable": {1: 2}}
    assert "1:1" in (tmp_path / "x.json.bak").read_text()
    assert not (tmp_path / "x.json.tmp").exists()
    (tmp_path / "x.json").write_text("{garbage")
    assert f.load() == {"offsetTable": {1: 1}}
    (tmp_path / "x.json").write_text("")
    assert f.load() == {"offsetTable": {1: 1}}
    (tmp_path / "x.json").unlink()
    assert f.load() == {"offsetTable": {1: 1}}
    (tmp_path / "x.json").write_text("{garbage")
    (tmp_path / "x.json.bak").write_text("{also garbage")
    with pytest.raises(ConfigFileError):
        f.load()


def test_reads_real_rocketmq_text_with_unknown_keys(tmp_path: Path) -> None:
    (tmp_path / "consumerOffset.json").write_text(
        '{\n\t"dataVersion":{"counter":1,"timestamp":2},\n\t"groupTopicMap":{"CG":["T"]},\n'
        '\t"offsetTable":{\n\t\t"T@CG":{0:7,3:9\n\t\t}\n\t}\n}'
    )
    assert ConfigFiles(str(tmp_path)).load_consumer_offsets() == {"T@CG": {0: 7, 3: 9}}

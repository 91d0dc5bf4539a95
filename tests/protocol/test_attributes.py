"""Topic attributes: parsing `+k=v,-k` and altering a topic's attributes, against the answers
Apache 5.3.3's `AttributeParser` / `AttributeUtil` give (recorded from the Java classes)."""

from __future__ import annotations

import pytest

from engine.protocol import attributes as attrs
from engine.protocol.body.register import RegisterBrokerBody
from engine.protocol.body.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper

FIFO = {"message.type": "FIFO", "queue.type": "SimpleCQ"}
MESSAGE_TYPES = "[UNSPECIFIED, MIXED, TRANSACTION, FIFO, DELAY, NORMAL]"


def alter(current: dict[str, str], text: str, *, create: bool) -> dict[str, str]:
    return attrs.alter(current, attrs.parse_modification(text), create=create)


@pytest.mark.parametrize(("create", "current", "text", "result"), [
    (True, {}, "+message.type=FIFO", {"message.type": "FIFO"}),
    (True, {}, "+reserve.time=5", {"reserve.time": "5"}),
    (True, {}, "+reserve.time=+5", {"reserve.time": "+5"}),
    (True, {}, "", {}),
    (True, {}, "+message.type=FIFO=1", {"message.type": "FIFO"}),
    (True, {}, "+message.type=FIFO,+queue.type=SimpleCQ,", FIFO),
    (False, FIFO, "+message.type=NORMAL", {"message.type": "NORMAL", "queue.type": "SimpleCQ"}),
    (False, FIFO, "-message.type", {"queue.type": "SimpleCQ"}),
    (False, FIFO, "", FIFO),
])
def test_alter_as_apache(create: bool, current: dict[str, str], text: str,
                         result: dict[str, str]) -> None:
    assert alter(current, text, create=create) == result


@pytest.mark.parametrize(("create", "current", "text", "message"), [
    (True, {}, "+message.type=fifo", f"value is not in set: {MESSAGE_TYPES}"),
    (True, {}, "+queue.type=Foo", "value is not in set: [SimpleCQ, BatchCQ]"),
    (True, {}, "+cleanup.policy=X", "value is not in set: [DELETE, COMPACTION]"),
    (True, {}, "+foo=bar", "unsupported key: foo"),
    (True, {}, "-message.type",
     "only add attribute is supported while creating topic. key: message.type"),
    (True, {}, "message.type=FIFO", "add/alter attribute format is wrong: message.type"),
    (True, {}, "+message.type", "delete attribute format is wrong: +message.type"),
    (True, {}, "+message.type=", "Index 1 out of bounds for length 1"),
    (True, {}, "+message.type=FIFO,+message.type=NORMAL", "key duplication: +message.type"),
    (True, {}, "+reserve.time=x", 'For input string: "x"'),
    (True, {}, "+reserve.time=-2", "value is not in range(-1, 9223372036854775807)"),
    (True, {}, "++message.type=FIFO", "kv string format wrong."),
    (True, {}, "+a-b=1", "kv string format wrong."),
    (False, FIFO, "+message.type=FIFO,-message.type",
     "alter duplication key. key: message.type"),
    (True, {}, "+reserve.time=99999999999999999999",
     'For input string: "99999999999999999999"'),
    (False, FIFO, "+queue.type=BatchCQ",
     "attempt to update an unchangeable attribute. key: queue.type"),
    (False, FIFO, "+queue.type=SimpleCQ",
     "attempt to update an unchangeable attribute. key: queue.type"),
    (False, FIFO, "-queue.type", "attempt to update an unchangeable attribute. key: queue.type"),
    (False, FIFO, "-cleanup.policy", "attempt to delete a nonexistent key: cleanup.policy"),
    (False, {}, "-message.type", "attempt to delete a nonexistent key: message.type"),
    (False, FIFO, "+cleanup.policy=DELETE",
     "attempt to update an unchangeable attribute. key: cleanup.policy"),
    (False, FIFO, "x-message.type", "kv string format wrong."),
    (False, FIFO, "-message.type=1", "add/alter attribute format is wrong: -message.type"),
])
def test_refusals_word_for_word(create: bool, current: dict[str, str], text: str,
                                message: str) -> None:
    with pytest.raises(attrs.AttributeProblem) as caught:
        alter(current, text, create=create)
    assert str(caught.value) == message


def test_group_attributes_are_all_unsupported() -> None:
    with pytest.raises(attrs.AttributeProblem, match=r"^unsupported key: a$"):
        attrs.alter({}, {"+a": "b"}, create=True, known=attrs.GROUP_ATTRIBUTES)
    assert attrs.alter({}, {}, create=True, known=attrs.GROUP_ATTRIBUTES) == {}


def test_text_round_trip_and_message_type() -> None:
    modification = attrs.parse_modification("+message.type=FIFO,-reserve.time")
    assert modification == {"+message.type": "FIFO", "-reserve.time": ""}
    assert attrs.format_modification(modification) == "+message.type=FIFO,-reserve.time"
    assert TopicConfig("T").message_type is attrs.TopicMessageType.NORMAL
    assert TopicConfig("T", attributes={"message.type": "DELAY"}).message_type == "DELAY"
    assert TopicConfig("T", attributes={}) == TopicConfig("T")  # {} and None alike


def test_compact_registration_keeps_five_fields_and_reads_a_sixth() -> None:
    """A 4.9 name server refuses a compact line without exactly five fields: ours has five;
    a 5.x broker's sixth (the attributes' JSON) is read."""
    config = TopicConfig("T", 4, 4, attributes={"message.type": "FIFO"})
    assert config.encode_compact() == "T 4 4 6 SINGLE_TAG"
    decoded = TopicConfig.decode_compact('T 4 4 6 SINGLE_TAG {"message.type":"FIFO"}')
    assert decoded == config
    assert TopicConfig.decode_compact("T 4 4 6 SINGLE_TAG {}") == TopicConfig("T", 4, 4)
    assert TopicConfig.decode_compact("T 4 4 6 SINGLE_TAG {bad") == TopicConfig("T", 4, 4)
    body = RegisterBrokerBody(TopicConfigSerializeWrapper({"T": config}, DataVersion(1, 2)))
    assert RegisterBrokerBody.decode(body.encode(compressed=True), compressed=True
                                     ).topic_config_serialize_wrapper.topic_config_table == {
        "T": TopicConfig("T", 4, 4)}
    plain = RegisterBrokerBody.decode(body.encode())
    assert plain.topic_config_serialize_wrapper.topic_config_table == {"T": config}


@pytest.mark.parametrize(("properties", "kind"), [
    ({}, "NORMAL"),
    ({"TRAN_MSG": "true", "DELAY": "3"}, "TRANSACTION"),
    ({"TRAN_MSG": "false"}, "NORMAL"),
    ({"DELAY": "3"}, "DELAY"),
    ({"TIMER_DELIVER_MS": "1700000000000", "__SHARDINGKEY": "g"}, "DELAY"),
    ({"TIMER_DELAY_SEC": "10"}, "DELAY"),
    ({"TIMER_DELAY_MS": "10"}, "DELAY"),
    ({"__SHARDINGKEY": "g"}, "FIFO"),
])
def test_message_type_of_a_message(properties: dict[str, str], kind: str) -> None:
    assert attrs.message_type_of_message(properties) == kind

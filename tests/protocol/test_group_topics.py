"""Retry-topic names of both 5.3 POP spellings (KeyBuilder V1 ``_``, V2 ``+``): whose they are."""

from __future__ import annotations

from engine.protocol import receipt
from engine.protocol.group_topics import (
    RetryTopic,
    groups_of_topics,
    is_system_group,
    parse_retry_topic,
    pop_retry_topic,
    pop_retry_topics,
)
from mqadmin.operations.group import pop_retry_topics_of
from mqadmin.operations.targets import consumer_groups


def test_both_spellings_are_5_3s_and_the_brokers() -> None:
    assert pop_retry_topic("G", "T") == "%RETRY%G_T" == receipt.pop_retry_topic("T", "G")
    assert (pop_retry_topic("G", "T", v2=True) == "%RETRY%G+T"
            == receipt.pop_retry_topic("T", "G", v2=True))
    assert pop_retry_topics("G", "T") == ("%RETRY%G_T", "%RETRY%G+T")


def test_v2_says_where_the_group_ends() -> None:
    assert parse_retry_topic("%RETRY%my_group+my_topic") == RetryTopic("my_group", "my_topic",
                                                                        v2=True)
    assert parse_retry_topic("%RETRY%G+T").is_pop  # type: ignore[union-attr]


def test_v1_is_decided_by_the_known_groups_and_topics() -> None:
    # Apache 5.3: a POP group has no %RETRY%G5, only its POP retry topic.
    assert parse_retry_topic("%RETRY%G5_Pay", {"G5"}, {"Pay"}) == RetryTopic("G5", "Pay")
    # a group whose own name holds "_" keeps its own retry topic
    assert parse_retry_topic("%RETRY%G5_Pay", {"G5_Pay", "G5"}, {"Pay"}) == RetryTopic("G5_Pay")
    # the longest known group whose rest is a topic wins
    assert parse_retry_topic("%RETRY%a_b_c", {"a", "a_b"}, {"c", "b_c"}) == RetryTopic("a_b", "c")
    assert parse_retry_topic("%RETRY%a_b_c", {"a"}, {"b_c"}) == RetryTopic("a", "b_c")
    # nothing known: Apache's reading (KeyBuilder.parseGroup), the whole name
    assert parse_retry_topic("%RETRY%G5_Pay") == RetryTopic("G5_Pay")
    assert parse_retry_topic("%RETRY%G5_Gone", {"G5"}, {"Pay"}) == RetryTopic("G5_Gone")
    assert parse_retry_topic("%DLQ%G5") is None
    assert parse_retry_topic("Pay") is None


def test_a_topic_list_names_each_group_once() -> None:
    apache5 = ["Pay", "Orders", "%RETRY%G5_Pay", "%RETRY%G5+Orders", "%DLQ%G5", "%RETRY%legacy"]
    assert groups_of_topics(apache5, {"G5", "legacy"}) == {"G5", "legacy"}
    assert consumer_groups(apache5, {"G5"}) == ["G5", "legacy"]
    # without the brokers' groups V1 stays ambiguous, V2 does not
    assert consumer_groups(apache5) == ["G5", "G5_Pay", "legacy"]
    # ours: a POP group has %RETRY%G beside its POP retry topics
    assert consumer_groups(["T", "%RETRY%G", "%RETRY%G_T"]) == ["G"]


def test_deleting_a_group_finds_its_pop_retry_topics_only() -> None:
    names = ["Pay", "Orders", "%RETRY%G5", "%RETRY%G5_Pay", "%RETRY%G5+Orders", "%RETRY%G5_x_Pay",
             "%RETRY%H_Pay", "%DLQ%G5", "%RETRY%G5_Gone"]
    assert pop_retry_topics_of("G5", names) == {"%RETRY%G5_Pay", "%RETRY%G5+Orders"}
    assert pop_retry_topics_of("G5_x", names) == {"%RETRY%G5_x_Pay"}


def test_system_groups() -> None:
    assert is_system_group("TOOLS_CONSUMER") and is_system_group("CID_RMQ_SYS_TRANS")
    assert is_system_group("CID_RMQ_SYS_anything") and not is_system_group("G5")

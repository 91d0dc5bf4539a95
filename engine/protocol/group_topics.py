"""What a consumer group's topic names say: whose retry topic, which POP retry topic of which
topic, which groups are the broker's own.

How this works: a remoting consumer group G retries through ``%RETRY%G``; a 5.x POP group
retries each topic T through its own POP retry topic, which 5.3 (`KeyBuilder`) spells
``%RETRY%G_T`` (V1, the default) or ``%RETRY%G+T`` (V2, `enableRetryTopicV2=true`).  A group
or topic name never holds "+" (``^[%|a-zA-Z0-9_-]+$``), so V2 says where the group ends.  V1
does not: ``%RETRY%a_b_c`` is the retry topic of group ``a_b_c``, or a POP retry topic of
group ``a`` (topic ``b_c``) or ``a_b`` (topic ``c``).  The known groups (the brokers'
subscription groups) and topics decide: a known group's own retry topic first, then a split
whose group is known and whose topic exists (the longest such group); otherwise the plain
retry topic of the whole name.  Among a list of topic names, a group with a plain retry
topic of its own in the list counts as known for the others (our broker and 4.x-style
consumers give a POP group ``%RETRY%<group>`` too; Apache 5.3 does not).
"""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable
from dataclasses import dataclass

from engine.protocol.message import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

POP_RETRY_SEPARATOR_V1 = "_"
POP_RETRY_SEPARATOR_V2 = "+"
#: The groups every broker creates for itself and its tools (5.3 MixAll.PREDEFINE_GROUP_SET).
PREDEFINED_GROUPS = frozenset({
    "DEFAULT_CONSUMER", "DEFAULT_PRODUCER", "TOOLS_CONSUMER", "SCHEDULE_CONSUMER",
    "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER", "CLIENT_INNER_PRODUCER", "SELF_TEST_P_GROUP",
    "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER",
    "CID_ONSAPI_PULL", "CID_RMQ_SYS_TRANS"})
#: 5.3 MixAll.CID_RMQ_SYS_PREFIX: the broker's system consumer groups.
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"


def is_system_group(group: str) -> bool:
    """A group of the broker itself, not of an application (5.3 `isPredefinedGroup` or
    `isSysConsumerGroup`)."""
    return group in PREDEFINED_GROUPS or group.startswith(SYSTEM_GROUP_PREFIX)


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``: the remoting retry topic."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``: the group's dead letters, remoting and POP alike."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def pop_retry_topic(group: str, topic: str, *, v2: bool = False) -> str:
    """The POP retry topic of `group` for `topic` (5.3 `buildPopRetryTopicV1`/`V2`)."""
    sep = POP_RETRY_SEPARATOR_V2 if v2 else POP_RETRY_SEPARATOR_V1
    return RETRY_GROUP_TOPIC_PREFIX + group + sep + topic


def pop_retry_topics(group: str, topic: str) -> tuple[str, str]:
    """Both spellings of the group's POP retry topic for `topic`: V1, V2."""
    return pop_retry_topic(group, topic), pop_retry_topic(group, topic, v2=True)


@dataclass(frozen=True, slots=True)
class RetryTopic:
    """Whose retry topic a name is: the group's own (`topic` None) or its POP retry topic of
    `topic` (`v2`: spelt with "+")."""

    group: str
    topic: str | None = None
    v2: bool = False

    @property
    def is_pop(self) -> bool:
        return self.topic is not None


def parse_retry_topic(name: str, groups: Container[str] = (),
                      topics: Container[str] = ()) -> RetryTopic | None:
    """Whose retry topic `name` is (None when it is no retry topic), the V1 spelling decided
    by the known `groups` and `topics` as the module docstring says."""
    if not name.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    rest = name[len(RETRY_GROUP_TOPIC_PREFIX):]
    head, plus, tail = rest.partition(POP_RETRY_SEPARATOR_V2)
    if plus:
        return RetryTopic(head, tail, v2=True) if head and tail else RetryTopic(rest)
    if rest in groups:
        return RetryTopic(rest)
    splits = [(rest[:i], rest[i + 1:]) for i, c in enumerate(rest)
              if c == POP_RETRY_SEPARATOR_V1 and 0 < i < len(rest) - 1]
    for group, topic in reversed(splits):  # the longest known group first
        if group in groups and topic in topics:
            return RetryTopic(group, topic)
    return RetryTopic(rest)


def groups_of_topics(names: Iterable[str], groups: Collection[str] = ()) -> set[str]:
    """The groups the retry topics among `names` belong to (POP retry topics to their
    group, not to a group of their own), with the known `groups` deciding as above."""
    listed = set(names)
    topics = {t for t in listed if not t.startswith("%")}
    prefix = len(RETRY_GROUP_TOPIC_PREFIX)
    hinted = {t[prefix:] for t in listed
              if t.startswith(RETRY_GROUP_TOPIC_PREFIX) and POP_RETRY_SEPARATOR_V2 not in t}
    others = set(groups) | hinted
    found: set[str] = set()
    for name in listed:
        own = name[prefix:]
        known: Container[str] = groups if own in groups else _Except(others, own)
        parsed = parse_retry_topic(name, known, topics)
        if parsed is not None:
            found.add(parsed.group)
    return found


@dataclass(frozen=True, slots=True)
class _Except:
    """The groups of `within` but `left_out`, without copying `within` (one lookup per retry
    topic: a copy each made listing groups quadratic in the topics)."""

    within: Container[str]
    left_out: str

    def __contains__(self, name: object) -> bool:
        return name != self.left_out and name in self.within

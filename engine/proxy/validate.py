"""The checks 5.3.3's proxy makes of names and texts, with its codes and messages (sans-IO).

How this works (5.3.3 `GrpcValidator`, `Validators.checkTopic/checkGroup`,
`TopicValidator`): a topic or consumer group is checked before anything else of a call, and
refused as ILLEGAL_TOPIC / ILLEGAL_CONSUMER_GROUP with 5.3.3's own words.  Java's rules are
kept where Python's differ: a name's length is counted in UTF-16 units (`String.length`),
"blank" is Java's `Character.isWhitespace` (not Python's `str.isspace`, which also takes
the no-break spaces), and a control character is Java's `isISOControl` (U+0000-U+001F and
U+007F-U+009F, tab and newlines included).  No message here echoes more than a name that
passed the length check.
"""

from __future__ import annotations

import re
import unicodedata

from engine.proxy.status import ProxyError
from engine.proxy.v2 import definition_pb2 as pb

TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")
_NAME_RULE = "^[%|a-zA-Z0-9_-]+$"

#: 5.3.3 `TopicValidator`'s system topics (and every topic starting with rmq_sys_).
SYSTEM_TOPICS = frozenset({
    "TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "CHECKPOINT_TOPIC"})
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"  # 5.3.3 `MixAll.isSysConsumerGroup`

_JAVA_SPACE_CONTROLS = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")
_NOT_JAVA_SPACE = frozenset("\xa0\u2007\u202f")
#: The ASCII characters `Character.isWhitespace` takes: the space and the controls above.
_ASCII_JAVA_SPACE = " \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"
#: `isISOControl`: U+0000-U+001F and U+007F-U+009F.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

# These run on every message sent (its id, tag, keys, properties), so the common case, an
# ASCII text, takes one C-level string method; the rest goes character by character.


def java_length(text: str) -> int:
    """`String.length()`: UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def _java_whitespace(c: str) -> bool:
    if c in _JAVA_SPACE_CONTROLS:
        return True
    return unicodedata.category(c) in ("Zs", "Zl", "Zp") and c not in _NOT_JAVA_SPACE


def is_blank(text: str) -> bool:
    """`StringUtils.isBlank`: empty or only Java whitespace."""
    if text.isascii():
        return not text.strip(_ASCII_JAVA_SPACE)
    return all(_java_whitespace(c) for c in text)


def has_control(text: str) -> bool:
    """`GrpcValidator.containControlCharacter`: Guava's `CharMatcher.javaIsoControl()`."""
    return _CONTROL.search(text) is not None


def _name_problem(name: str, kind: str, max_length: int) -> str | None:
    """`Validators.checkTopic` / `checkGroup`: why `name` is refused, or None."""
    if is_blank(name):
        return "The specified topic is blank" if kind == "topic" else \
            "the specified group is blank"
    if java_length(name) > max_length:
        if kind == "topic":
            return f"The specified topic is longer than topic max length {max_length}."
        return f"the specified group is longer than group max length {max_length}."
    if not _NAME.fullmatch(name):
        subject = "The specified topic" if kind == "topic" else "the specified group"
        return f"{subject}[{name}] contains illegal characters, allowing only {_NAME_RULE}"
    return None


def validate_topic(resource: pb.Resource) -> str:
    """5.3.3 `GrpcValidator.validateTopic`; returns the name.

    Raises:
        ProxyError: ILLEGAL_TOPIC.
    """
    name = resource.name
    problem = _name_problem(name, "topic", TOPIC_MAX_LENGTH)
    if problem is not None:
        raise ProxyError(pb.ILLEGAL_TOPIC, problem)
    if name in SYSTEM_TOPICS or name.startswith(SYSTEM_TOPIC_PREFIX):
        raise ProxyError(pb.ILLEGAL_TOPIC, "cannot access system topic")  # TopicValidator
    return name


def validate_group(resource: pb.Resource) -> str:
    """5.3.3 `GrpcValidator.validateConsumerGroup`; returns the name.

    Raises:
        ProxyError: ILLEGAL_CONSUMER_GROUP.
    """
    name = resource.name
    problem = _name_problem(name, "group", GROUP_MAX_LENGTH)
    if problem is not None:
        raise ProxyError(pb.ILLEGAL_CONSUMER_GROUP, problem)
    if name.startswith(SYSTEM_GROUP_PREFIX):
        raise ProxyError(pb.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")
    return name


def is_system_resource(name: str) -> bool:
    return name in SYSTEM_TOPICS or name.startswith((SYSTEM_TOPIC_PREFIX, SYSTEM_GROUP_PREFIX))


def split_namespace(name: str) -> tuple[str, str]:
    """5.3.3 `NamespaceUtil.getNamespaceFromResource` / `withoutNamespace`: a stored name
    ``[%RETRY%|%DLQ%]NAMESPACE%NAME`` as (namespace, name without it); ("", name) when it
    has none or is a system topic or group.  5.3.3 names a received message's topic so."""
    if not name or is_system_resource(name):
        return "", name
    prefix = ""
    for marker in ("%RETRY%", "%DLQ%"):
        if name.startswith(marker):
            prefix = marker
    bare = name[len(prefix):]
    index = bare.find("%")
    if index <= 0:
        return "", name
    return bare[:index], prefix + bare[index + 1:]


def validate_tag(tag: str) -> None:
    """5.3.3 `GrpcValidator.validateTag` (an empty tag is no tag).

    Raises:
        ProxyError: ILLEGAL_MESSAGE_TAG.
    """
    if not tag:
        return
    if is_blank(tag):
        raise ProxyError(pb.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
    if "|" in tag:
        raise ProxyError(pb.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
    if has_control(tag):
        raise ProxyError(pb.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")

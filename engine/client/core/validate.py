"""Client-side checks on what a producer sends (Java's `Validators`) and on group names."""

from __future__ import annotations

import re

from engine.client.core.errors import MessageValidationError
from engine.client.core.message import Message

TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
DEFAULT_TOPIC = "TBW102"
#: Topics a producer may not send to (`TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`).
NOT_ALLOWED_SEND = frozenset({"SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC",
                              "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
                              "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"})


def check_topic(topic: str) -> None:
    """Raises `MessageValidationError` for a name brokers would refuse."""
    if not topic or not topic.strip():
        raise MessageValidationError("The specified topic is blank")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise MessageValidationError(
            f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
    if not TOPIC_PATTERN.match(topic):
        raise MessageValidationError(
            f"The specified topic[{topic}] contains illegal characters, allowing only "
            "^[%|a-zA-Z0-9_-]+$")
    if topic == DEFAULT_TOPIC:
        raise MessageValidationError(
            f"The topic[{topic}] is conflict with AUTO_CREATE_TOPIC_KEY_TOPIC.")
    if topic in NOT_ALLOWED_SEND:
        raise MessageValidationError(f"Sending message to topic[{topic}] is forbidden.")


def check_message(msg: Message, max_size: int) -> None:
    """`Validators.checkMessage`: topic name, a body, and not more than `max_size` bytes."""
    check_topic(msg.topic)
    if not msg.body:
        raise MessageValidationError("the message body length is zero")
    if len(msg.body) > max_size:
        raise MessageValidationError(
            f"the message body size over max value, MAX: {max_size}")


def check_group(group: str) -> None:
    if not group or not group.strip():
        raise MessageValidationError("the specified group is blank")
    if len(group) > GROUP_MAX_LENGTH:
        raise MessageValidationError(f"the specified group is longer than group max length "
                                     f"{GROUP_MAX_LENGTH}.")
    if not TOPIC_PATTERN.match(group):
        raise MessageValidationError(
            f"the specified group[{group}] contains illegal characters, allowing only "
            "^[%|a-zA-Z0-9_-]+$")

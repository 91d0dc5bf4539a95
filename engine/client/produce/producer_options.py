"""Producer settings (Java's `DefaultMQProducer` defaults) and the ordered-send queue selectors."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.client.core.fault import LATENCY_MAX_4_9_7, NOT_AVAILABLE_DURATION_4_9_7
from engine.client.core.message import Message
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.message import java_string_hash

RETRY_RESPONSE_CODES = frozenset({17, 14, 1, 16, 204, 205})
MessageQueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def select_by_hash(queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """`SelectMessageQueueByHash`: Java's `abs(arg.hashCode()) % n` (str and int args)."""
    h = java_string_hash(arg) if isinstance(arg, str) else int(arg)
    return queues[abs(h) % len(queues)]


def select_by_random(queues: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    return random.choice(list(queues))


@dataclass(frozen=True, slots=True)
class ProducerOptions:
    send_msg_timeout: int = 3000
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    max_message_size: int = 4 * 1024 * 1024
    compress_msg_body_over_howmuch: int = 4096
    compress_level: int = 5
    default_topic_queue_nums: int = 4
    send_latency_fault_enable: bool = False
    latency_max: tuple[int, ...] = LATENCY_MAX_4_9_7
    not_available_duration: tuple[int, ...] = field(default=NOT_AVAILABLE_DURATION_4_9_7)
    enable_trace: bool = False  # enableMsgTrace: Pub records to the trace topic
    trace_topic: str | None = None  # customizedTraceTopic (default RMQ_SYS_TRACE_TOPIC)

"""Push consumer settings (Java's `DefaultMQPushConsumer` defaults) and listener types."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from engine.client.consume.allocate import AllocateMessageQueueAveragely, AllocateStrategy
from engine.client.consume.consume_from import default_consume_timestamp
from engine.client.consume.dedupe import Dedupe
from engine.client.core.message import MessageExt
from engine.client.core.results import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from engine.protocol.body.heartbeat import ConsumeFromWhere, MessageModel

ConcurrentListener = Callable[
    [list[MessageExt], ConsumeConcurrentlyContext],
    "ConsumeConcurrentlyStatus | Awaitable[ConsumeConcurrentlyStatus | None] | None"]
OrderlyListener = Callable[
    [list[MessageExt], ConsumeOrderlyContext],
    "ConsumeOrderlyStatus | Awaitable[ConsumeOrderlyStatus | None] | None"]

MAX_INT = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ConsumerOptions:
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp: str = field(default_factory=default_consume_timestamp)  # yyyyMMddHHmmss
    allocate_strategy: AllocateStrategy = field(default_factory=AllocateMessageQueueAveragely)
    consume_thread_max: int = 20  # listeners (coroutines) running at once
    consume_concurrently_max_span: int = 2000
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100  # MiB
    pull_threshold_for_topic: int = -1
    pull_threshold_size_for_topic: int = -1
    pull_interval: int = 0  # ms
    consume_message_batch_max_size: int = 1
    pull_batch_size: int = 32
    post_subscription_when_pull: bool = False
    max_reconsume_times: int = -1  # 16 concurrently, MAX_INT orderly
    suspend_current_queue_time_millis: int = 1000
    consume_timeout: int = 15  # minutes
    unit_mode: bool = False
    local_offset_store_dir: str | None = None  # broadcasting; default ~/.rocketmq_offsets
    broker_suspend_max_time_millis: int = 15_000
    consumer_timeout_millis_when_suspend: int = 30_000
    pull_time_delay_millis_when_exception: int = 1000
    check_client_in_broker: bool = True  # CHECK_CLIENT_CONFIG for SQL92 subscriptions
    await_termination_millis: int = 10_000  # shutdown waits this long for running listeners
    dedupe: Dedupe | None = None  # run each business key once (dedupe.py)
    enable_trace: bool = False  # enableMsgTrace: SubBefore/SubAfter to the trace topic
    trace_topic: str | None = None  # customizedTraceTopic (default RMQ_SYS_TRACE_TOPIC)

    def max_reconsume(self, orderly: bool) -> int:
        if self.max_reconsume_times != -1:
            return self.max_reconsume_times
        return MAX_INT if orderly else 16


@dataclass(frozen=True, slots=True)
class LitePullOptions:
    """`DefaultLitePullConsumer` defaults."""

    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp: str = field(default_factory=default_consume_timestamp)
    allocate_strategy: AllocateStrategy = field(default_factory=AllocateMessageQueueAveragely)
    pull_batch_size: int = 10
    auto_commit: bool = True
    auto_commit_interval_millis: int = 5000
    pull_threshold_for_all: int = 10_000
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100  # MiB
    consume_max_span: int = 2000
    poll_timeout_millis: int = 5000
    broker_suspend_max_time_millis: int = 20_000
    consumer_timeout_millis_when_suspend: int = 30_000
    pull_time_delay_millis_when_exception: int = 1000
    unit_mode: bool = False
    local_offset_store_dir: str | None = None
    check_client_in_broker: bool = True
    dedupe: Dedupe | None = None  # poll() claims business keys (dedupe.py, `consuming`)


@dataclass(frozen=True, slots=True)
class PopOptions:
    """`PopConsumer` settings (5.x SimpleConsumer / PushConsumer-in-POP-mode defaults)."""

    invisible_time_millis: int = 60_000  # a popped message stays invisible this long
    poll_time_millis: int = 20_000  # how long the broker may hold an empty POP
    pop_batch_size: int = 32  # messages per POP
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    order: bool = False  # FIFO pops: a queue's messages in order, one consumer at a time
    receivers: int = 2  # POP requests in flight while listening
    retry_backoff_millis: int = 1000  # a failed message turns visible again this much later
    # a message popped again after this many reconsumes goes to %DLQ%<group> (the
    # Java client's maxReconsumeTimes default; the 5.x proxy's maxAttempts less one)
    max_reconsume_times: int = 16
    await_termination_millis: int = 10_000  # shutdown waits this long for listener calls

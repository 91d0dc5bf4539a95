"""`PushConsumer`: subscriptions, rebalance, long-polling pulls and a listener, all in one.

How this works (client-behaviour.md §3-§9): `start()` registers the consumer with its client
instance (clustering consumers also subscribe ``%RETRY%<group>``), loads the offset store
(broker offsets when clustering, a local file when broadcasting), checks non-TAG
subscriptions with the brokers, heartbeats and asks for a rebalance.  The `Rebalancer` then
calls the hooks below for every queue gained or lost; each held queue gets a `PullLoop` task
feeding the consume service (`consume_concurrently.py` or `consume_orderly.py`).  Offsets are
committed by the instance every 5 s and here at shutdown, which also waits (up to
`await_termination_millis`) for running listeners, unlocks orderly queues and unregisters
the group from every broker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from engine.client.consume import dedupe
from engine.client.consume.consume_concurrently import ConsumeConcurrentlyService
from engine.client.consume.consume_from import (
    OffsetLookup,
    OffsetUnknownError,
    StartOffsets,
    retry_topic,
    subscription,
)
from engine.client.consume.consume_orderly import ConsumeOrderlyService
from engine.client.consume.consumer_options import (
    ConcurrentListener,
    ConsumerOptions,
    OrderlyListener,
)
from engine.client.consume.consumer_support import ConsumerSupport
from engine.client.consume.dedupe_services import DedupeConcurrentlyService, DedupeOrderlyService
from engine.client.consume.process_queue import ProcessQueue, now_ms
from engine.client.consume.pull_loop import PullLoop
from engine.client.consume.rebalance import Rebalancer
from engine.client.core.client_config import ClientConfig
from engine.client.core.errors import ClientStateError
from engine.client.core.instance import ClientInstance
from engine.client.core.message import MessageExt
from engine.client.core.pull_codec import message_ext
from engine.client.core.validate import check_group
from engine.client.produce.producer import trace_producer
from engine.client.trace.dispatch import TraceDispatcher
from engine.client.trace.hooks import ConsumeTracer, traced_listener
from engine.protocol.body.admin import (
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ConsumeStatus,
)
from engine.protocol.body.heartbeat import (
    ConsumerData,
    ConsumeType,
    ExpressionType,
    MessageModel,
    SubscriptionData,
)
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.errors import ProtocolError
from engine.protocol.message import decode_record
from engine.protocol.version import CURRENT_VERSION, version_desc

log = logging.getLogger(__name__)

UNLOCK_DELAY = 20.0  # rocketmq.client.unlockDelayTimeMills


class PushConsumer(ConsumerSupport):
    """``c = PushConsumer("CG", config); c.subscribe("T", "TagA || TagB");
    c.register_concurrently(listener); await c.start()``."""

    consume_type = ConsumeType.CONSUME_PASSIVELY

    def __init__(self, group: str, config: ClientConfig | None = None, *,
                 options: ConsumerOptions | None = None,
                 instance: ClientInstance | None = None) -> None:
        check_group(group)
        self.options = options or ConsumerOptions()
        config = config or ClientConfig()
        if self.options.message_model is MessageModel.CLUSTERING:
            config = config.with_pid_instance_name()
        super().__init__(group, config, instance, message_model=self.options.message_model,
                         store_dir=self.options.local_offset_store_dir,
                         check_client=self.options.check_client_in_broker)
        self._subs: dict[str, SubscriptionData] = {}
        self.consume_service: ConsumeConcurrentlyService | ConsumeOrderlyService | None = None
        self.rebalancer = Rebalancer(self.instance, group, self.options.message_model,
                                     self.options.allocate_strategy, self, drop_idle=True)
        self.start_offsets = StartOffsets(self.offset_store, OffsetLookup(self.instance),
                                          self.options.consume_from_where,
                                          self.options.consume_timestamp)
        self.paused = False
        self.started_ms = 0
        self._pulls: dict[MessageQueue, asyncio.Task[None]] = {}
        self._topic_limits: dict[str, tuple[int, int]] = {}
        self._guard = (None if self.options.dedupe is None else dedupe.Guard(
            self.options.dedupe, group, dedupe.new_owner(self.instance.client_id)))
        o = self.options
        self.tracer: ConsumeTracer | None = None
        if o.enable_trace:
            dispatcher = TraceDispatcher(trace_producer(self.instance, group, "CONSUMER"),
                                         o.trace_topic)
            self.tracer = ConsumeTracer(dispatcher, group, o.consume_timeout * 60_000)

    # ------------------------------------------------------------------ setup

    def subscribe(self, topic: str, expression: str | None = "*",
                  expression_type: ExpressionType = ExpressionType.TAG) -> None:
        """Subscribe `topic` by tags (``"TagA || TagB"``, ``"*"``) or an SQL92 expression."""
        self._subs[topic] = subscription(topic, expression, expression_type)
        if self.running:
            self.spawn(self._subscription_changed(topic))

    def unsubscribe(self, topic: str) -> None:
        self._subs.pop(topic, None)

    def register_concurrently(self, listener: ConcurrentListener) -> None:
        if self.tracer is not None:
            listener = traced_listener(listener, self.tracer)
        self.consume_service = (
            ConsumeConcurrentlyService(self, listener) if self._guard is None
            else DedupeConcurrentlyService(self, listener, self._guard))

    def register_orderly(self, listener: OrderlyListener) -> None:
        if self.tracer is not None:
            listener = traced_listener(listener, self.tracer)
        self.consume_service = (
            ConsumeOrderlyService(self, listener) if self._guard is None
            else DedupeOrderlyService(self, listener, self._guard))

    @property
    def orderly(self) -> bool:
        return isinstance(self.consume_service, ConsumeOrderlyService)

    def subscriptions(self) -> Iterable[SubscriptionData]:
        return tuple(self._subs.values())

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
               dispatch: bool) -> None:
        """Hand pulled messages to the consume service."""
        assert self.consume_service is not None
        self.consume_service.submit(msgs, pq, mq, dispatch)

    def subscription_of(self, topic: str) -> SubscriptionData | None:
        return self._subs.get(topic)

    def consumer_data(self) -> ConsumerData:
        o = self.options
        return ConsumerData(self.group, self.consume_type, o.message_model,
                            o.consume_from_where, frozenset(self._subs.values()), o.unit_mode)

    def thresholds(self, topic: str) -> tuple[int, int]:
        """(message count, MiB) a queue of `topic` may cache before its pulls pause."""
        o = self.options
        limits = self._topic_limits.get(topic)
        return limits or (o.pull_threshold_for_queue, o.pull_threshold_size_for_queue)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self.running:
            return
        if self.consume_service is None:
            raise ClientStateError("register a message listener before start()")
        if not self._subs:
            raise ClientStateError("subscribe a topic before start()")
        if self.options.message_model is MessageModel.CLUSTERING:
            rt = retry_topic(self.group)
            self._subs.setdefault(rt, subscription(rt, "*"))
        self.started_ms = now_ms()
        await self._start_member()
        if self.tracer is not None:
            await self.tracer.dispatcher.start()
        self.consume_service.start()
        self.instance.rebalance_now()

    async def _subscription_changed(self, topic: str) -> None:
        await self.instance.update_route(topic)
        await self.instance.heartbeat_all()
        self.instance.rebalance_now()

    async def shutdown(self) -> None:
        if not self.running:
            return
        self.stopping = True
        for task in list(self._pulls.values()):
            task.cancel()
        await asyncio.gather(*self._pulls.values(), return_exceptions=True)
        self._pulls.clear()
        assert self.consume_service is not None
        await self.consume_service.shutdown()
        await self.settle(self.options.await_termination_millis / 1000)
        if self._guard is not None:
            await self._guard.close()
        if self.orderly and self.options.message_model is MessageModel.CLUSTERING:
            await self.unlock_all(oneway=False)
        await self.offset_store.persist_all(self.rebalancer.table, final=True)
        self.rebalancer.drop_all()
        if self.tracer is not None:
            await self.tracer.dispatcher.stop()
        await self._stop_member()

    def suspend(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    # ------------------------------------------------------------------ rebalance hooks

    async def rebalance(self) -> None:
        if self.running and not self.stopping:
            await self.rebalancer.rebalance(list(self._subs))

    async def queue_added(self, mq: MessageQueue) -> tuple[ProcessQueue, int] | None:
        pq = ProcessQueue()
        if (self.orderly and self.options.message_model is MessageModel.CLUSTERING
                and not await self.lock_one(mq, pq)):
            return None
        self.offset_store.remove(mq)
        try:
            offset = await self.start_offsets.compute(mq)
        except OffsetUnknownError as exc:
            log.info("%s: %s", self.group, exc)
            return None
        return pq, offset

    async def queue_removed(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        task = self._pulls.pop(mq, None)
        if task is not None:
            task.cancel()
        if isinstance(self.consume_service, ConsumeOrderlyService):
            self.consume_service.dropped(pq)
        await self.offset_store.persist(mq)
        self.offset_store.remove(mq)
        if not (self.orderly and self.options.message_model is MessageModel.CLUSTERING):
            return True
        if pq.consume_lock.locked():
            pq.try_unlock_times += 1
            return False
        if pq.msg_count:
            self.spawn(self._unlock_later(mq))
        else:
            await self.unlock([mq], oneway=True)
        return True

    async def _unlock_later(self, mq: MessageQueue) -> None:
        await asyncio.sleep(UNLOCK_DELAY)
        await self.unlock([mq], oneway=True)

    async def assignment_changed(self, topic: str, mq_all: frozenset[MessageQueue],
                                 mine: frozenset[MessageQueue]) -> None:
        """`messageQueueChanged`: per-topic limits, new subscription version, heartbeat."""
        o = self.options
        if mine and (o.pull_threshold_for_topic != -1 or o.pull_threshold_size_for_topic != -1):
            count = (max(1, o.pull_threshold_for_topic // len(mine))
                     if o.pull_threshold_for_topic != -1 else o.pull_threshold_for_queue)
            size = (max(1, o.pull_threshold_size_for_topic // len(mine))
                    if o.pull_threshold_size_for_topic != -1
                    else o.pull_threshold_size_for_queue)
            self._topic_limits[topic] = (count, size)
        sub = self._subs.get(topic)
        if sub is not None:
            self._subs[topic] = SubscriptionData(
                sub.topic, sub.sub_string, sub.tags_set, sub.code_set, now_ms(),
                sub.expression_type, sub.class_filter_mode)
        await self.instance.heartbeat_all()
        self.notify_assignment(topic, mine)

    def start_pulling(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        loop = PullLoop(self, mq, pq, offset)
        self._pulls[mq] = asyncio.get_running_loop().create_task(loop.run(), name=f"pull {mq}")

    async def remove_process_queue(self, mq: MessageQueue) -> None:
        pq = self.rebalancer.table.pop(mq, None)
        if pq is not None:
            pq.dropped = True
            await self.queue_removed(mq, pq)

    # ------------------------------------------------------------------ broker requests

    def running_info(self) -> ConsumerRunningInfo:
        o = self.options
        props = {"consumerGroup": self.group, "messageModel": o.message_model.name,
                 "consumeFromWhere": o.consume_from_where.name,
                 "consumeMessageBatchMaxSize": str(o.consume_message_batch_max_size),
                 "pullBatchSize": str(o.pull_batch_size),
                 "PROP_CONSUME_ORDERLY": str(self.orderly).lower(),
                 "PROP_CONSUME_TYPE": self.consume_type.name,
                 "PROP_CLIENT_VERSION": version_desc(CURRENT_VERSION),
                 "PROP_CONSUMER_START_TIMESTAMP": str(self.started_ms),
                 "PROP_NAMESERVER_ADDR": self.instance.namesrv_addr or "",
                 "PROP_THREADPOOL_CORE_SIZE": str(o.consume_thread_max)}
        table = {mq: pq.info(self.offset_store.table.get(mq, -1))
                 for mq, pq in self.rebalancer.table.items()}
        return ConsumerRunningInfo(props, list(self._subs.values()), table,
                                   {t: ConsumeStatus() for t in self._subs})

    async def consume_directly(self, body: bytes, broker_name: str | None
                               ) -> ConsumeMessageDirectlyResult:
        assert self.consume_service is not None
        try:
            msg = message_ext(decode_record(body), broker_name or "",
                              retry_topic=retry_topic(self.group))
        except ProtocolError as exc:
            return ConsumeMessageDirectlyResult(self.orderly, True, CMResult.CR_THROW_EXCEPTION,
                                                f"message does not decode: {exc}")
        return await self.consume_service.consume_directly(msg, broker_name)

    async def reset_offsets(self, topic: str, table: dict[MessageQueue, int]) -> None:
        """`MQClientInstance.resetOffset`: drop the topic's queues, store the new offsets,
        and let the next rebalance start them again (without Java's 10 s pause)."""
        self.paused = True
        try:
            held = [(mq, pq) for mq, pq in self.rebalancer.table.items()
                    if mq.topic == topic and mq in table]
            for _, pq in held:
                pq.dropped = True
                pq.clear()
            for mq, pq in held:
                self.offset_store.update(mq, table[mq], False)
                await self.queue_removed(mq, pq)
                self.rebalancer.table.pop(mq, None)
        finally:
            self.paused = False
        self.instance.rebalance_now()

"""`Producer`: sync, async, oneway, ordered and batch sends with Java's retry rules.

How this works (client-behaviour.md §2): a send finds the topic's publish queues (fetching
the route, or TBW102's for a topic brokers will auto-create), picks a queue (`publish.py`),
and sends SEND_MESSAGE_V2 to that broker's master.  A sync send makes up to
1 + `retry_times_when_send_failed` attempts within `send_msg_timeout`, each on another broker
than the last, retrying after transport failures and broker codes 17, 14, 1, 16, 204, 205;
an async send does the same with `retry_times_when_send_async_failed` and retries any
failure; oneway and queue-selected sends make one attempt.  Every attempt reports the
broker's latency to the fault table (`fault.py`) and a failed one refreshes the topic's
route in the background.  A stored-but-not-OK status (flush/slave timeouts) is a result, not
a failure, unless `retry_another_broker_when_not_store_ok`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from engine.client.core.client_config import ClientConfig
from engine.client.core.errors import (
    BadResponseError,
    BrokerNotFoundError,
    ClientStateError,
    MessageValidationError,
    NoRouteError,
    SendFailedError,
    ServerError,
    UnreachableError,
)
from engine.client.core.fault import LatencyFaultTolerance
from engine.client.core.instance import ClientInstance
from engine.client.core.message import Message
from engine.client.core.publish import QueueIndex, TopicPublishInfo, select_queue
from engine.client.core.results import SendResult, SendStatus
from engine.client.core.send_codec import batch_request, prepare_message, single_request
from engine.client.core.validate import check_group, check_message
from engine.client.produce import batch as batching
from engine.client.produce.producer_options import (
    RETRY_RESPONSE_CODES,
    MessageQueueSelector,
    ProducerOptions,
    select_by_hash,
    select_by_random,
)
from engine.client.trace.dispatch import (
    COMPRESS_LEVEL,
    MAX_MESSAGE_SIZE,
    SEND_TIMEOUT_MS,
    TraceDispatcher,
    trace_group,
)
from engine.client.trace.hooks import SendTracer, now_ms
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.command import RemotingCommand
from engine.remoting.connection import Connection

log = logging.getLogger(__name__)

__all__ = ["MessageQueueSelector", "Producer", "ProducerOptions", "select_by_hash",
           "select_by_random", "trace_producer"]

class Producer:
    """``p = Producer("PG", ClientConfig(namesrv_addr=...)); await p.start();
    await p.send(Message("T", b"x"))``."""

    def __init__(self, group: str, config: ClientConfig | None = None, *,
                 options: ProducerOptions | None = None, instance: ClientInstance | None = None,
                 register: bool = True) -> None:
        check_group(group)
        self.group = group
        self.options = options or ProducerOptions()
        self._own_instance = instance is None
        self.instance = instance or ClientInstance(
            (config or ClientConfig()).with_pid_instance_name())
        self._register = register
        o = self.options
        self.fault = LatencyFaultTolerance(enabled=o.send_latency_fault_enable,
                                           latency_max=o.latency_max,
                                           not_available_duration=o.not_available_duration)
        self._topics: set[str] = set()
        self._indexes: dict[str, QueueIndex] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._running = False
        self.tracer: SendTracer | None = None
        if o.enable_trace:
            dispatcher = TraceDispatcher(trace_producer(self.instance, group, "PRODUCER"),
                                         o.trace_topic)
            self.tracer = SendTracer(dispatcher, group)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._running:
            return
        if self._register:
            self.instance.register_producer(self)
        await self.instance.start()
        if self.tracer is not None:
            await self.tracer.dispatcher.start()
        self._running = True

    async def shutdown(self) -> None:
        if not self._running:
            return
        self._running = False
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.tracer is not None:
            await self.tracer.dispatcher.stop()
        if self._register:
            await self.instance.unregister(producer_group=self.group)
            if self._own_instance:
                await self.instance.release()

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def publish_topics(self) -> Iterable[str]:
        return tuple(self._topics)

    async def check_transaction_state(self, conn: Connection, cmd: RemotingCommand) -> None:
        log.warning("%s is not a transaction producer: check of %s ignored", self.group,
                    cmd.ext("transactionId"))

    def _check_running(self) -> None:
        if not self._running:
            raise ClientStateError(f"producer {self.group} is not running; start() it first")

    # ------------------------------------------------------------------ routes

    async def publish_info(self, topic: str) -> TopicPublishInfo:
        """`tryToFindTopicPublishInfo`.

        Raises:
            NoRouteError: neither the topic nor TBW102 has a route.
        """
        self._topics.add(topic)
        info = self.instance.routes.publish_info(topic)
        if info is None or not info.ok:
            await self.instance.update_route(topic)
            info = self.instance.routes.publish_info(topic)
        if info is None or not info.ok:
            await self.instance.update_route(
                topic, default_queue_nums=self.options.default_topic_queue_nums)
            info = self.instance.routes.publish_info(topic)
        if info is None or not info.ok:
            raise NoRouteError(topic)
        return info

    async def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        return list((await self.publish_info(topic)).queues)

    def _refresh_later(self, topic: str) -> None:
        task = asyncio.get_running_loop().create_task(self.instance.update_route(topic))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ the attempt

    async def _addr(self, mq: MessageQueue) -> str:
        addr = await self.instance.master_addr_of(mq)
        if addr is None:
            raise BrokerNotFoundError(mq.broker_name)
        return addr

    def _request(self, msg: Message, props: dict[str, str], oneway: bool
                 ) -> Callable[[MessageQueue], RemotingCommand]:
        o = self.options

        def build(mq: MessageQueue) -> RemotingCommand:
            return single_request(msg, props, mq, group=self.group,
                                  default_queue_nums=o.default_topic_queue_nums,
                                  compress_over=o.compress_msg_body_over_howmuch,
                                  compress_level=o.compress_level, oneway=oneway)
        return build

    async def _send_once(self, build: Callable[[MessageQueue], RemotingCommand], msg_id: str,
                         mq: MessageQueue, timeout: float, oneway: bool = False
                         ) -> SendResult | None:
        """`sendKernelImpl`: one request to the master of `mq`'s broker."""
        addr = await self._addr(mq)
        cmd = build(mq)
        if oneway:
            await self.instance.api.send_oneway(addr, cmd)
            return None
        return await self.instance.api.send(addr, cmd, mq, msg_id, timeout)

    async def _send_default(self, topic: str, build: Callable[[MessageQueue], RemotingCommand],
                            msg_id: str, *, retries: int, retry_any: bool,
                            timeout_ms: int | None, oneway: bool = False) -> SendResult | None:
        """`sendDefaultImpl` (the message is validated and given its UNIQ_KEY already)."""
        loop = asyncio.get_running_loop()
        begin = loop.time()
        timeout = (timeout_ms if timeout_ms is not None else self.options.send_msg_timeout) / 1e3
        info = await self.publish_info(topic)
        index = self._indexes.setdefault(topic, QueueIndex())
        errors: list[tuple[str, Exception]] = []
        result: SendResult | None = None
        last_broker: str | None = None
        timed_out = False
        for _ in range(1 + retries):
            mq = select_queue(info, index, last_broker, self.fault)
            last_broker = mq.broker_name
            t0 = loop.time()
            if t0 - begin >= timeout:
                timed_out = True
                break
            try:
                result = await self._send_once(build, msg_id, mq, timeout - (t0 - begin), oneway)
            except (UnreachableError, BrokerNotFoundError, BadResponseError) as exc:
                self.fault.update(mq.broker_name, int((loop.time() - t0) * 1000), True)
                errors.append((mq.broker_name, exc))
                self._refresh_later(topic)
                continue
            except ServerError as exc:
                self.fault.update(mq.broker_name, int((loop.time() - t0) * 1000), True)
                errors.append((mq.broker_name, exc))
                self._refresh_later(topic)
                if retry_any or exc.code in RETRY_RESPONSE_CODES:
                    continue
                raise
            self.fault.update(mq.broker_name, int((loop.time() - t0) * 1000), False)
            if (result is not None and result.status is not SendStatus.SEND_OK
                    and self.options.retry_another_broker_when_not_store_ok):
                continue
            return result
        if result is not None:
            return result
        cost = int((loop.time() - begin) * 1000)
        if timed_out:
            raise SendFailedError(f"sendDefaultImpl call timeout: {cost} ms spent of "
                                  f"{int(timeout * 1000)} ms", errors)
        brokers = [b for b, _ in errors]
        raise SendFailedError(f"Send [{len(errors)}] times, still failed, cost [{cost}]ms, "
                              f"Topic: {topic}, BrokersSent: {brokers}: {errors[-1][1]}",
                              errors)

    async def _send_message(self, msg: Message, *, retries: int, retry_any: bool,
                            timeout_ms: int | None, oneway: bool = False) -> SendResult | None:
        self._check_running()
        check_message(msg, self.options.max_message_size)
        props, uniq = prepare_message(msg)
        begin = now_ms()
        result = await self._send_default(msg.topic, self._request(msg, props, oneway), uniq,
                                          retries=retries, retry_any=retry_any,
                                          timeout_ms=timeout_ms, oneway=oneway)
        self._trace(msg, result, begin)
        return result

    def _trace(self, msg: Message, result: SendResult | None, begin_ms: int) -> None:
        """The Pub record of a send that got an answer (enable_trace)."""
        if self.tracer is not None and result is not None:
            addr = self.instance.master_addr(result.message_queue.broker_name)
            self.tracer.sent(msg, result, addr, begin_ms)

    # ------------------------------------------------------------------ public sends

    async def send(self, msg: Message, *, timeout_ms: int | None = None) -> SendResult:
        """Send and wait for the broker's answer (retrying as the module docstring says)."""
        result = await self._send_message(msg, retries=self.options.retry_times_when_send_failed,
                                          retry_any=False, timeout_ms=timeout_ms)
        assert result is not None
        return result

    def send_async(self, msg: Message, *,
                   on_success: Callable[[SendResult], None] | None = None,
                   on_exception: Callable[[BaseException], None] | None = None,
                   timeout_ms: int | None = None) -> asyncio.Task[SendResult]:
        """Start a send; the task's result (and `on_success`) is its `SendResult`."""
        self._check_running()

        async def run() -> SendResult:
            try:
                result = await self._send_message(
                    msg, retries=self.options.retry_times_when_send_async_failed,
                    retry_any=True, timeout_ms=timeout_ms)
            except BaseException as exc:
                if on_exception is not None and not isinstance(exc, asyncio.CancelledError):
                    on_exception(exc)
                raise
            assert result is not None
            if on_success is not None:
                on_success(result)
            return result

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def send_oneway(self, msg: Message) -> None:
        """Send without waiting for an answer (one attempt)."""
        await self._send_message(msg, retries=0, retry_any=False, timeout_ms=None, oneway=True)

    async def send_to_queue(self, msg: Message, mq: MessageQueue, *,
                            timeout_ms: int | None = None) -> SendResult:
        """Send to one given queue (one attempt)."""
        self._check_running()
        check_message(msg, self.options.max_message_size)
        if msg.topic != mq.topic:
            raise MessageValidationError("message's topic not equal mq's topic")
        self._topics.add(mq.topic)
        props, uniq = prepare_message(msg)
        timeout = (timeout_ms if timeout_ms is not None else self.options.send_msg_timeout) / 1e3
        begin = now_ms()
        result = await self._send_once(self._request(msg, props, False), uniq, mq, timeout)
        assert result is not None
        self._trace(msg, result, begin)
        return result

    async def send_select(self, msg: Message, selector: MessageQueueSelector, arg: Any, *,
                          timeout_ms: int | None = None) -> SendResult:
        """Ordered send: `selector(queues, msg, arg)` picks the queue (one attempt)."""
        self._check_running()
        check_message(msg, self.options.max_message_size)
        info = await self.publish_info(msg.topic)
        mq = selector(info.queues, msg, arg)
        return await self.send_to_queue(msg, mq, timeout_ms=timeout_ms)

    async def send_batch(self, msgs: Sequence[Message], *, timeout_ms: int | None = None
                         ) -> list[SendResult]:
        """Send as SEND_BATCH_MESSAGE bodies of at most `max_message_size` bytes each; every
        body is retried like a sync send."""
        self._check_running()
        results: list[SendResult] = []
        wait = msgs[0].wait_store_msg_ok if msgs else True
        for part in batching.chunks(msgs, self.options.max_message_size):
            def build(mq: MessageQueue, body: bytes = part.body) -> RemotingCommand:
                return batch_request(body, mq, group=self.group, wait_store_msg_ok=wait,
                                     default_queue_nums=self.options.default_topic_queue_nums)
            result = await self._send_default(
                msgs[0].topic, build, part.msg_id,
                retries=self.options.retry_times_when_send_failed, retry_any=False,
                timeout_ms=timeout_ms)
            assert result is not None
            results.append(result)
        return results


def trace_producer(instance: ClientInstance, group: str, role: str) -> Producer:
    """The producer a traced group's `TraceDispatcher` sends with: group
    ``_INNER_TRACE_PRODUCER-<group>-<role>`` on the traced client's instance, not registered
    with it, and with the trace dispatcher's timeout, size limit and compression."""
    return Producer(trace_group(group, role), instance=instance, register=False,
                    options=ProducerOptions(send_msg_timeout=SEND_TIMEOUT_MS,
                                            max_message_size=MAX_MESSAGE_SIZE,
                                            compress_level=COMPRESS_LEVEL))

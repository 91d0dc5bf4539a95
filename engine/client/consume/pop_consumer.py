"""`PopConsumer`: consumption where the broker hands out messages (5.x POP over remoting).

How this works: nothing is rebalanced and no offset is kept here.  `receive()` pops from one
master hosting the topic at a time (queue -1: every queue of it, the group's pop retry topic
included), in turn, as 5.x clients do; each message carries its receipt (POP_CK) and stays
invisible to the group until it is acked, its invisibility changed, or its invisible time
passes, when the broker hands it out again with its reconsume times raised.  `listen()`
runs a listener over what `receivers` POP loops bring: a coroutine listener's calls on one
pop's messages run together, successes are acked in one BATCH_ACK per pop, failures made
visible again after `retry_backoff_millis`; with
`order=True` (FIFO pops), a batch's messages one after the other, each acked after its
success, and after a failure the rest of the batch comes back with it.  A message popped
with more than `max_reconsume_times` reconsumes is not handed to the listener: it goes to
`%DLQ%<group>` (CONSUMER_SEND_MSG_BACK, delay level -1, then an ack), as 5.3.3's proxy sends a
message past its client's maxAttempts (`PopMessageResultFilterImpl`, TO_DLQ), so its dead
letter is the one 5.3.3 stores (the broker's revive never dead-letters; Apache's Java POP
consumer acks such a message and it is lost).  The consumer registers with its brokers as a
CONSUME_POP member, so the console lists it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace

from engine.client.consume.consume_direct import consume_directly
from engine.client.consume.consume_from import subscription
from engine.client.consume.consumer_options import PopOptions
from engine.client.consume.consumer_support import ConsumerSupport
from engine.client.core.client_config import ClientConfig
from engine.client.core.errors import ClientError, ClientStateError, NoRouteError
from engine.client.core.instance import ClientInstance
from engine.client.core.message import MessageExt
from engine.client.core.pop_calls import AckStatus
from engine.client.core.pop_codec import PopResult, pop_header, receipt_of
from engine.client.core.pull_codec import message_ext
from engine.client.core.results import ConsumeConcurrentlyStatus
from engine.client.core.validate import check_group
from engine.protocol.body.admin import (
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ConsumeStatus,
)
from engine.protocol.body.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    ExpressionType,
    MessageModel,
    SubscriptionData,
)
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.errors import ProtocolError
from engine.protocol.header.broker import ConsumerSendMsgBackRequestHeader
from engine.protocol.header.pop import INIT_MODE_MAX, INIT_MODE_MIN, PopMessageRequestHeader
from engine.protocol.message import PROPERTY_POP_CK, decode_record
from engine.protocol.version import CURRENT_VERSION, version_desc

log = logging.getLogger(__name__)

#: CONSUMER_SEND_MSG_BACK's delay level that sends a message to the group's DLQ at once.
DLQ_DELAY_LEVEL = -1
PopListener = Callable[
    [MessageExt], "ConsumeConcurrentlyStatus | Awaitable[ConsumeConcurrentlyStatus | None] | None"]
ERROR_PAUSE = 1.0  # seconds a receive loop waits after a failed POP
_RESULTS = {ConsumeConcurrentlyStatus.CONSUME_SUCCESS: CMResult.CR_SUCCESS,
            ConsumeConcurrentlyStatus.RECONSUME_LATER: CMResult.CR_LATER}


class PopConsumer(ConsumerSupport):
    """``c = PopConsumer("CG", config); c.subscribe("T"); await c.start();
    msgs = await c.receive(); await c.ack(msgs[0])`` or ``c.listen(listener)``."""

    consume_type = ConsumeType.CONSUME_POP

    def __init__(self, group: str, config: ClientConfig | None = None, *,
                 options: PopOptions | None = None,
                 instance: ClientInstance | None = None) -> None:
        check_group(group)
        self.options = options or PopOptions()
        super().__init__(group, (config or ClientConfig()).with_pid_instance_name(), instance,
                         message_model=MessageModel.CLUSTERING, store_dir=None,
                         check_client=True)
        self._subs: dict[str, SubscriptionData] = {}
        self._turn: dict[str, int] = {}
        self.listener: PopListener | None = None
        self.started_ms = 0

    # ------------------------------------------------------------------ setup

    def subscribe(self, topic: str, expression: str | None = "*",
                  expression_type: ExpressionType = ExpressionType.TAG) -> None:
        self._subs[topic] = subscription(topic, expression, expression_type)

    def subscriptions(self) -> Iterable[SubscriptionData]:
        return tuple(self._subs.values())

    async def start(self) -> None:
        if self.running:
            return
        if not self._subs:
            raise ClientStateError("subscribe a topic before starting a POP consumer")
        await self._start_member()
        self.started_ms = int(time.time() * 1000)

    async def shutdown(self) -> None:
        if not self.running:
            return
        self.stopping = True
        await self.settle(self.options.await_termination_millis / 1000)
        await self._stop_member()

    # ------------------------------------------------------------------ receive / ack

    def _header(self, sub: SubscriptionData, max_nums: int, invisible_ms: int,
                poll_ms: int) -> PopMessageRequestHeader:
        o = self.options
        init = (INIT_MODE_MIN if o.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
                else INIT_MODE_MAX)
        return pop_header(self.group, sub.topic, sub, max_nums, invisible_ms, poll_ms,
                          init_mode=init, order=o.order)

    def _next_broker(self, topic: str) -> tuple[str, str]:
        """(broker name, master address) of the next broker hosting `topic`, in turn."""
        names = sorted({mq.broker_name
                        for mq in self.instance.routes.subscribe_queues(topic)})
        turn = self._turn.get(topic, 0)
        for i in range(len(names)):
            name = names[(turn + i) % len(names)]
            addr = self.instance.master_addr(name)
            if addr is not None:
                self._turn[topic] = turn + i + 1
                return name, addr
        raise NoRouteError(topic)

    async def pop(self, topic: str | None = None, *, max_nums: int | None = None,
                  invisible_ms: int | None = None, poll_ms: int | None = None) -> PopResult:
        """One POP at the next broker of `topic` (default: the only subscribed topic)."""
        if not self.running:
            raise ClientStateError("the POP consumer is not started")
        sub = self._sub(topic)
        o = self.options
        name, addr = self._next_broker(sub.topic)
        header = self._header(sub, max_nums or o.pop_batch_size,
                              o.invisible_time_millis if invisible_ms is None else invisible_ms,
                              o.poll_time_millis if poll_ms is None else poll_ms)
        return await self.instance.api.pop(addr, name, header)

    async def receive(self, topic: str | None = None, *, max_nums: int | None = None,
                      invisible_ms: int | None = None,
                      poll_ms: int | None = None) -> list[MessageExt]:
        """Popped messages ([] when the broker's long poll ended without one)."""
        result = await self.pop(topic, max_nums=max_nums, invisible_ms=invisible_ms,
                                poll_ms=poll_ms)
        return result.messages

    def _sub(self, topic: str | None) -> SubscriptionData:
        if topic is None:
            if len(self._subs) != 1:
                raise ClientStateError("name the topic: this consumer subscribes "
                                       f"{len(self._subs)} topics")
            return next(iter(self._subs.values()))
        sub = self._subs.get(topic)
        if sub is None:
            raise ClientStateError(f"topic {topic} is not subscribed by {self.group}")
        return sub

    def _addr(self, broker_name: str) -> str:
        addr = self.instance.master_addr(broker_name)
        if addr is None:
            raise ClientError(f"no master known for broker {broker_name}")
        return addr

    async def ack(self, msg: MessageExt) -> AckStatus:
        """ACK_MESSAGE: the message is consumed (NO_EXIST: its receipt expired or was used)."""
        receipt = receipt_of(msg)
        return await self.instance.api.ack(self._addr(receipt.broker_name), self.group,
                                           msg.topic, receipt)

    async def batch_ack(self, msgs: Iterable[MessageExt]) -> AckStatus:
        """One BATCH_ACK_MESSAGE per broker; NO_EXIST when any broker refused."""
        by_broker: dict[str, dict[str, list[MessageExt]]] = {}
        for m in msgs:
            by_broker.setdefault(m.broker_name, {}).setdefault(m.topic, []).append(m)
        status = AckStatus.OK
        for broker, topics in by_broker.items():
            for topic, group_msgs in topics.items():
                got = await self.instance.api.batch_ack(
                    self._addr(broker), self.group, topic, [receipt_of(m) for m in group_msgs])
                if got is not AckStatus.OK:
                    status = got
        return status

    async def change_invisible_time(self, msg: MessageExt, invisible_ms: int) -> MessageExt:
        """The message turns visible `invisible_ms` from now; returns it with its new
        receipt (ack that one from now on).

        Raises:
            ClientError: the broker refused the receipt (expired, acked, or unknown).
        """
        receipt = receipt_of(msg)
        status, new = await self.instance.api.change_invisible_time(
            self._addr(receipt.broker_name), self.group, msg.topic, receipt, invisible_ms)
        if new is None:
            raise ClientError(f"change invisible time of {msg.msg_id}: {status.value} (the "
                              "receipt expired, was acked, or is unknown)")
        return replace(msg, properties={**msg.properties, PROPERTY_POP_CK: new.encode()})

    async def forward_to_dlq(self, msg: MessageExt) -> None:
        """The popped message to `%DLQ%<group>` (CONSUMER_SEND_MSG_BACK with delay level -1
        to the broker it was popped from), then acked, as 5.3.3's proxy forwards one.

        Raises:
            ClientError: the broker refused the send-back (the message then comes back
                after its invisible time).
        """
        receipt = receipt_of(msg)
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset, group=self.group, delay_level=DLQ_DELAY_LEVEL,
            origin_msg_id=msg.msg_id, origin_topic=msg.topic, max_reconsume_times=0)
        await self.instance.api.send_back(self._addr(receipt.broker_name), header)
        try:
            await self.ack(msg)  # 5.3.3 acks after the forward, whatever the ack says
        except ClientError as exc:
            log.info("%s: ack of %s after its forward to the DLQ failed: %s", self.group,
                     msg.msg_id, exc)

    # ------------------------------------------------------------------ listening

    def listen(self, listener: PopListener) -> None:
        """Run `listener` on every message from now until shutdown."""
        if not self.running:
            raise ClientStateError("start the POP consumer before listening")
        self.listener = listener
        for topic in self._subs:
            for _ in range(max(1, self.options.receivers)):
                self.spawn(self._receive_loop(topic))

    async def _receive_loop(self, topic: str) -> None:
        while self.running and not self.stopping:
            try:
                msgs = await self.receive(topic)
            except (ClientError, ProtocolError) as exc:
                log.warning("%s: pop of %s failed: %s", self.group, topic, exc)
                await asyncio.sleep(ERROR_PAUSE)
                continue
            msgs = self._deliverable(msgs)
            if not msgs:
                continue
            if self.options.order:
                await self._consume_in_order(msgs)
            else:
                await self._consume_batch(msgs)

    def _deliverable(self, msgs: list[MessageExt]) -> list[MessageExt]:
        """The messages for the listener; those reconsumed more than `max_reconsume_times`
        go to the DLQ instead, in the background."""
        limit = self.options.max_reconsume_times
        keep = []
        for m in msgs:
            if m.reconsume_times > limit:
                self.spawn(self._dead_letter(m), work=True)
            else:
                keep.append(m)
        return keep

    async def _dead_letter(self, msg: MessageExt) -> None:
        try:
            await self.forward_to_dlq(msg)
        except ClientError as exc:
            log.warning("%s: %s (reconsumed %d times) not sent to the DLQ, it will come back "
                        "after its invisible time: %s", self.group, msg.msg_id,
                        msg.reconsume_times, exc)
        else:
            log.info("%s: %s reconsumed %d times: sent to %%DLQ%%%s", self.group, msg.msg_id,
                     msg.reconsume_times, self.group)

    async def _call(self, msg: MessageExt) -> bool:
        assert self.listener is not None
        try:
            outcome = self.listener(msg)
            status = await outcome if inspect.isawaitable(outcome) else outcome
        except Exception:
            log.exception("%s: listener failed on %s", self.group, msg.msg_id)
            return False
        return status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def _settled(self, msg: MessageExt, outcome: Awaitable[object]) -> bool:
        try:
            return await outcome is ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        except Exception:
            log.exception("%s: listener failed on %s", self.group, msg.msg_id)
            return False

    async def _consume_batch(self, msgs: list[MessageExt]) -> None:
        """A plain listener runs on each message in turn; a coroutine listener's calls run
        together (a pop's batch at most)."""
        assert self.listener is not None
        ok: list[bool] = []
        waiting: list[tuple[int, Awaitable[bool]]] = []
        for m in msgs:
            try:
                outcome = self.listener(m)
            except Exception:
                log.exception("%s: listener failed on %s", self.group, m.msg_id)
                ok.append(False)
                continue
            if inspect.isawaitable(outcome):
                waiting.append((len(ok), self._settled(m, outcome)))
                ok.append(False)
            else:
                ok.append(outcome is ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
        if waiting:
            for (i, _), got in zip(waiting, await asyncio.gather(*(w for _, w in waiting)),
                                   strict=True):
                ok[i] = got
        done = [m for m, good in zip(msgs, ok, strict=True) if good]
        if done:
            self.spawn(self._settle_acks(done), work=True)
        for m, good in zip(msgs, ok, strict=True):
            if not good:
                self.spawn(self._retry_later(m), work=True)

    async def _consume_in_order(self, msgs: list[MessageExt]) -> None:
        for i, m in enumerate(msgs):
            if not await self._call(m):
                for rest in msgs[i:]:
                    await self._retry_later(rest)
                return
            try:
                await self.ack(m)
            except ClientError as exc:
                log.warning("%s: ack of %s failed: %s", self.group, m.msg_id, exc)

    async def _settle_acks(self, msgs: list[MessageExt]) -> None:
        try:
            status = await self.batch_ack(msgs)
        except ClientError as exc:
            log.warning("%s: batch ack of %d messages failed: %s", self.group, len(msgs), exc)
            return
        if status is not AckStatus.OK:
            log.warning("%s: a broker refused acks of %d messages (receipts expired?)",
                        self.group, len(msgs))

    async def _retry_later(self, msg: MessageExt) -> None:
        try:
            await self.change_invisible_time(msg, self.options.retry_backoff_millis)
        except ClientError as exc:
            log.warning("%s: %s will come back after its invisible time: %s", self.group,
                        msg.msg_id, exc)

    # ------------------------------------------------------------------ membership

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(self.group, ConsumeType.CONSUME_POP, MessageModel.CLUSTERING,
                            self.options.consume_from_where, frozenset(self._subs.values()))

    async def rebalance(self) -> None:
        """Nothing to rebalance: the broker hands out messages."""

    async def persist_offsets(self) -> None:
        """Nothing to persist: a POP group's offsets are the broker's."""

    def running_info(self) -> ConsumerRunningInfo:
        o = self.options
        props = {"consumerGroup": self.group, "messageModel": MessageModel.CLUSTERING.name,
                 "consumeFromWhere": o.consume_from_where.name,
                 "popBatchNums": str(o.pop_batch_size),
                 "popInvisibleTime": str(o.invisible_time_millis),
                 "maxReconsumeTimes": str(o.max_reconsume_times),
                 "PROP_CONSUME_ORDERLY": str(o.order).lower(),
                 "PROP_CONSUME_TYPE": ConsumeType.CONSUME_POP.name,
                 "PROP_CLIENT_VERSION": version_desc(CURRENT_VERSION),
                 "PROP_CONSUMER_START_TIMESTAMP": str(self.started_ms),
                 "PROP_NAMESERVER_ADDR": self.instance.namesrv_addr or ""}
        return ConsumerRunningInfo(props, list(self._subs.values()), {},
                                   {t: ConsumeStatus() for t in self._subs})

    async def consume_directly(self, body: bytes, broker_name: str | None
                               ) -> ConsumeMessageDirectlyResult:
        if self.listener is None:
            return ConsumeMessageDirectlyResult(self.options.order, True,
                                                CMResult.CR_THROW_EXCEPTION,
                                                "the POP consumer has no listener")
        try:
            msg = message_ext(decode_record(body), broker_name or "")
        except ProtocolError as exc:
            return ConsumeMessageDirectlyResult(self.options.order, True,
                                                CMResult.CR_THROW_EXCEPTION,
                                                f"message does not decode: {exc}")
        listener = self.listener
        return await consume_directly(self.options.order, _RESULTS, lambda: listener(msg))

    async def reset_offsets(self, topic: str, table: dict[MessageQueue, int]) -> None:
        """A POP group's offsets live on the broker, which the reset already changed."""


"""What a traced producer or consumer records: Pub, SubBefore/SubAfter and EndTransaction.

How this works (Apache's `SendMessageTraceHookImpl`, `ConsumeMessageTraceHookImpl`,
`EndTransactionTraceHookImpl`): `SendTracer.sent` turns a send's result into a Pub record,
encoded at once (skipped when the broker answered TRACE_ON=false, or for the trace topic
itself); `traced_listener` wraps a consumer's listener so that each call records SubBefore
(one per message not marked TRACE_ON=false, one request id for the call) and then SubAfter
with the call's time divided by its number of messages, whether it succeeded and how it
ended (`ConsumeReturnType`).  Everything goes to a `TraceDispatcher`, which never waits.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from engine.client.core.ids import uniq_ids
from engine.client.core.message import Message, MessageExt
from engine.client.core.results import SendResult, SendStatus
from engine.client.trace.dispatch import TraceDispatcher
from engine.protocol.message import PROPERTY_DELAY_TIME_LEVEL, PROPERTY_KEYS
from engine.protocol.trace import (
    CONTENT_SPLITOR,
    DEFAULT_REGION,
    ConsumeReturnType,
    EndTransactionRecord,
    MessageType,
    SubAfterRecord,
    SubBeforeRecord,
)

PROPERTY_MSG_REGION = "MSG_REGION"
PROPERTY_TRACE_SWITCH = "TRACE_ON"
PROPERTY_START_DELIVER_TIME = "__STARTDELIVERTIME"
_SEND_OK = SendStatus.SEND_OK
SUCCESS_STATUSES = frozenset({"CONSUME_SUCCESS", "SUCCESS", "COMMIT"})

L = TypeVar("L", bound=Callable[..., Any])
_time = time.time


def now_ms() -> int:
    return int(time.time() * 1000)


def message_type(msg: Message) -> MessageType:
    """`sendKernelImpl`'s message type: half, delayed or normal."""
    if msg.is_transactional:
        return MessageType.TRANS_HALF
    props, system = msg.properties, msg.system_properties
    if (msg.delay_time_level
            or PROPERTY_START_DELIVER_TIME in props or PROPERTY_DELAY_TIME_LEVEL in props
            or PROPERTY_START_DELIVER_TIME in system or PROPERTY_DELAY_TIME_LEVEL in system):
        return MessageType.DELAY
    return MessageType.NORMAL


class SendTracer:
    """The Pub and EndTransaction records of one producer group."""

    def __init__(self, dispatcher: TraceDispatcher, group: str) -> None:
        self.dispatcher = dispatcher
        self.group = group
        self._group_field = f"{CONTENT_SPLITOR}{group}{CONTENT_SPLITOR}"

    def sent(self, msg: Message, result: SendResult, store_host: str | None,
             begin_ms: int) -> None:
        """Queue the Pub record of a send that got an answer: once per traced send, so the
        record is written here directly, as `trace.encode` writes a `PubRecord` (the tests
        hold the two to the same bytes), rather than through a record and helper calls."""
        topic = msg.topic
        dispatcher = self.dispatcher
        if not result.trace_on or topic.startswith(dispatcher.topic):
            return
        keys = " ".join(msg.keys) if msg.keys else None  # split again once per batch
        msg_id = result.msg_id
        cost = int(_time() * 1000) - begin_ms
        tags = msg.tags
        # a message without properties or delay is NORMAL: no need to ask message_type
        kind = (int(message_type(msg))
                if msg.delay_time_level or msg.properties or msg.system_properties else 0)
        offset_msg_id = result.offset_msg_id
        # \x01 is CONTENT_SPLITOR and \x02 FIELD_SPLITOR, written as literals: a name
        # would be looked up and formatted once per field
        dispatcher.append_encoded(
            f"Pub\x01{begin_ms}\x01{result.region_id}{self._group_field}{topic}\x01{msg_id}\x01"
            f"{'null' if tags is None else tags}\x01{'null' if keys is None else keys}\x01"
            f"{store_host or ''}\x01{len(msg.body)}\x01{cost if cost > 0 else 0}\x01{kind}\x01"
            f"{'null' if offset_msg_id is None else offset_msg_id}\x01"
            f"{'true' if result.status is _SEND_OK else 'false'}\x02",
            msg_id, keys)

    def ended(self, *, topic: str, tags: str | None, keys: str | None, msg_id: str,
              transaction_id: str | None, state: str, broker_addr: str,
              region_id: str | None, from_check: bool) -> None:
        if topic.startswith(self.dispatcher.topic):
            return
        self.dispatcher.append([EndTransactionRecord(
            timestamp=now_ms(), region_id=region_id or DEFAULT_REGION, group=self.group,
            topic=topic, msg_id=msg_id, tags=tags, keys=keys, store_host=broker_addr,
            msg_type=MessageType.TRANS_COMMIT, transaction_id=transaction_id,
            transaction_state=state, from_transaction_check=from_check)])


class ConsumeTracer:
    """The SubBefore and SubAfter records of one consumer group."""

    def __init__(self, dispatcher: TraceDispatcher, group: str, timeout_ms: int) -> None:
        self.dispatcher = dispatcher
        self.group = group
        self.timeout_ms = timeout_ms

    def before(self, msgs: list[MessageExt]) -> list[SubBeforeRecord]:
        request_id = uniq_ids().next()
        start = now_ms()
        records = [SubBeforeRecord(start, m.properties.get(PROPERTY_MSG_REGION), self.group,
                                   request_id, m.msg_id, m.reconsume_times,
                                   m.properties.get(PROPERTY_KEYS))
                   for m in msgs if m.properties.get(PROPERTY_TRACE_SWITCH) != "false"]
        self.dispatcher.append(records)
        return records

    def after(self, before: list[SubBeforeRecord], count: int, status: Any,
              raised: bool) -> None:
        if not before:
            return
        end = now_ms()
        spent = end - before[0].timestamp
        name = getattr(status, "name", None)
        success = name in SUCCESS_STATUSES
        if name is None:
            code = ConsumeReturnType.EXCEPTION if raised else ConsumeReturnType.RETURNNULL
        elif spent >= self.timeout_ms:
            code = ConsumeReturnType.TIME_OUT
        else:
            code = ConsumeReturnType.SUCCESS if success else ConsumeReturnType.FAILED
        cost = spent // max(count, 1)
        self.dispatcher.append([SubAfterRecord(b.request_id, b.msg_id, cost, success, b.keys,
                                               code, end, self.group) for b in before])


def traced_listener(listener: L, tracer: ConsumeTracer) -> L:
    """`listener` recording SubBefore when called and SubAfter with its verdict; a
    coroutine listener is timed while it runs."""
    if inspect.iscoroutinefunction(listener):
        @functools.wraps(listener)
        async def run_async(msgs: list[MessageExt], ctx: Any) -> Any:
            before = tracer.before(msgs)
            try:
                status = await listener(msgs, ctx)
            except BaseException:
                tracer.after(before, len(msgs), None, True)
                raise
            tracer.after(before, len(msgs), status, False)
            return status
        return cast(L, run_async)

    @functools.wraps(listener)
    def run(msgs: list[MessageExt], ctx: Any) -> Any:
        before = tracer.before(msgs)
        try:
            outcome = listener(msgs, ctx)
        except BaseException:
            tracer.after(before, len(msgs), None, True)
            raise
        if inspect.isawaitable(outcome):
            return _finish(outcome, before, len(msgs), tracer)
        tracer.after(before, len(msgs), outcome, False)
        return outcome
    return cast(L, run)


async def _finish(outcome: Awaitable[Any], before: list[SubBeforeRecord], count: int,
                  tracer: ConsumeTracer) -> Any:
    try:
        status = await outcome
    except BaseException:
        tracer.after(before, count, None, True)
        raise
    tracer.after(before, count, status, False)
    return status

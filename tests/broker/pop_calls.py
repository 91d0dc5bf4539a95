"""POP requests as a 5.x client sends them, over plain remoting calls (broker POP tests)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from engine.protocol import fastjson, receipt
from engine.protocol.body.pop import BatchAck, BatchAckMessageRequestBody, encode_bits
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.header.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    NotificationRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from engine.protocol.message import PROPERTY_POP_CK, MessageRecord, decode_records
from engine.protocol.receipt import ExtraInfo
from engine.protocol.wire import from_ext, to_ext, to_json
from engine.remoting.client import RemotingClient


@dataclass(frozen=True, slots=True)
class Popped:
    record: MessageRecord
    receipt: ExtraInfo

    @property
    def body(self) -> bytes:
        return self.record.body

    @property
    def real_topic(self) -> str:
        """The topic the message was popped from (what ACK names)."""
        return self.receipt.topic(self.record.topic, self.group)

    group: str = ""


@dataclass(frozen=True, slots=True)
class PopAnswer:
    code: int
    remark: str | None
    header: PopMessageResponseHeader | None
    messages: list[Popped]


def pop_request(group: str, topic: str, *, queue_id: int = -1, max_nums: int = 32,
                invisible_ms: int = 60_000, poll_ms: int = 0, init_mode: int = 0,
                order: bool = False, attempt_id: str | None = None, exp: str | None = None,
                exp_type: str | None = None, born_time: int = 0) -> RemotingCommand:
    """`born_time` 0 lets the broker use its own clock (tests on a manual clock)."""
    header = PopMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=queue_id, max_msg_nums=max_nums,
        invisible_time=invisible_ms, poll_time=poll_ms, born_time=born_time,
        init_mode=init_mode, exp_type=exp_type, exp=exp, order=order, attempt_id=attempt_id)
    return request(RequestCode.POP_MESSAGE, to_ext(header))


def receipts(group: str, header: PopMessageResponseHeader, body: bytes | None,
             broker_name: str) -> list[Popped]:
    """Each message with its receipt, as 5.3's `MQClientAPIImpl.processPopResponse` builds it."""
    if not body:
        return []
    starts = receipt.parse_start_offset_info(header.start_offset_info)
    out = []
    for rec in decode_records(body):
        ck = rec.properties().get(PROPERTY_POP_CK)
        if ck is not None:
            info = ExtraInfo.parse(ck)
        else:
            key = receipt.queue_key(rec.topic, rec.queue_id)
            info = ExtraInfo(starts[key], header.pop_time, header.invisible_time,
                             header.revive_qid, receipt.retry_mark(rec.topic), broker_name,
                             rec.queue_id, rec.queue_offset)
        out.append(Popped(rec, info, group))
    return out


async def pop(client: RemotingClient, addr: str, group: str, topic: str, *,
              broker_name: str = "broker-a", timeout: float = 10, **kwargs: object) -> PopAnswer:
    cmd = pop_request(group, topic, **kwargs)  # type: ignore[arg-type]
    resp = await client.invoke(addr, cmd, timeout=timeout)
    header = (from_ext(PopMessageResponseHeader, resp.ext_fields)
              if resp.ext_fields and "popTime" in resp.ext_fields else None)
    messages = receipts(group, header, resp.body, broker_name) if header else []
    return PopAnswer(resp.code, resp.remark, header, messages)


async def pop_until(client: RemotingClient, addr: str, group: str, topic: str, want: int, *,
                    poll_ms: int = 100, deadline_s: float = 30, **kwargs: object
                    ) -> list[Popped]:
    """Pop in short polls until `want` messages came (within `deadline_s`).  For revived
    messages: they land in the V1 pop retry topic, which (as in 5.3.3) wakes no held pop, so
    a long poll would sleep out its time before the next pop takes them."""
    got: list[Popped] = []
    async with asyncio.timeout(deadline_s):
        while len(got) < want:
            answer = await pop(client, addr, group, topic, poll_ms=poll_ms,
                               timeout=poll_ms / 1000 + 10, **kwargs)
            assert answer.code in (ResponseCode.SUCCESS, ResponseCode.POLLING_TIMEOUT), answer
            got += answer.messages
    return got


async def ack(client: RemotingClient, addr: str, msg: Popped) -> RemotingCommand:
    header = AckMessageRequestHeader(
        consumer_group=msg.group, topic=msg.real_topic, queue_id=msg.receipt.queue_id,
        extra_info=msg.receipt.encode(), offset=msg.record.queue_offset)
    return await client.invoke(addr, request(RequestCode.ACK_MESSAGE, to_ext(header)),
                               timeout=10)


async def batch_ack(client: RemotingClient, addr: str, msgs: list[Popped]) -> RemotingCommand:
    """One BatchAck per checkpoint (queue, start offset, pop time), as 5.x clients group them."""
    groups: dict[tuple[str, int, int, int], list[Popped]] = {}
    for m in msgs:
        groups.setdefault((m.receipt.retry, m.receipt.queue_id, m.receipt.ck_queue_offset,
                           m.receipt.pop_time), []).append(m)
    acks = []
    for (retry, queue_id, start, pop_time), ms in groups.items():
        first = ms[0]
        acks.append(BatchAck(
            consumer_group=first.group, topic=first.record.topic, retry=retry,
            start_offset=start, queue_id=queue_id, revive_queue_id=first.receipt.revive_qid,
            pop_time=pop_time, invisible_time=first.receipt.invisible_time,
            bit_set=encode_bits(m.record.queue_offset - start for m in ms)))
    body = fastjson.dumpb(to_json(BatchAckMessageRequestBody("broker-a", acks)))
    return await client.invoke(addr, request(RequestCode.BATCH_ACK_MESSAGE, None, body),
                               timeout=10)


async def change_invisible(client: RemotingClient, addr: str, msg: Popped, invisible_ms: int
                           ) -> tuple[RemotingCommand, Popped | None]:
    """The answer, and the message with its new receipt (None when refused)."""
    header = ChangeInvisibleTimeRequestHeader(
        consumer_group=msg.group, topic=msg.real_topic, queue_id=msg.receipt.queue_id,
        extra_info=msg.receipt.encode(), offset=msg.record.queue_offset,
        invisible_time=invisible_ms)
    resp = await client.invoke(
        addr, request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, to_ext(header)), timeout=10)
    if resp.code != 0:
        return resp, None
    answer = from_ext(ChangeInvisibleTimeResponseHeader, resp.ext_fields)
    info = ExtraInfo(msg.record.queue_offset, answer.pop_time, answer.invisible_time,
                     answer.revive_qid, msg.receipt.retry, msg.receipt.broker_name,
                     msg.receipt.queue_id, msg.record.queue_offset)
    return resp, Popped(msg.record, info, msg.group)


def notification_request(group: str, topic: str, *, queue_id: int = -1, poll_ms: int = 0,
                         order: bool = False, attempt_id: str | None = None) -> RemotingCommand:
    header = NotificationRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id,
                                       poll_time=poll_ms, born_time=int(time.time() * 1000),
                                       order=order, attempt_id=attempt_id)

    return request(RequestCode.NOTIFICATION, to_ext(header))

"""The 5.x POP requests to one broker: pop, ack, batch ack, change invisibility, peek, and the
long-polled notification (5.3 `MQClientAPIImpl`).

How this works: `pop` waits for the broker's long poll plus the call timeout.  An ack answers
OK or NO_EXIST (any refusal), as 5.3's client reports it, rather than raising: a receipt that
expired or was acked already is an outcome the caller handles, not a failure of the call.
`change_invisible_time` returns the message's new receipt (its checkpoint now starts at the
message itself, as 5.3's client builds it).  Batch acks group receipts by checkpoint (retry
mark, queue, checkpoint offset, pop time) into one `BatchAck` each.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from engine.client.core.broker_call import BrokerCalls, decode_header
from engine.client.core.errors import UnreachableError
from engine.client.core.pop_codec import (
    PopResult,
    ack_request,
    change_invisible_request,
    pop_request,
    pop_result,
)
from engine.protocol import fastjson
from engine.protocol.body.pop import BatchAck, BatchAckMessageRequestBody, encode_bits
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.header.pop import (
    ChangeInvisibleTimeResponseHeader,
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageRequestHeader,
)
from engine.protocol.receipt import ExtraInfo
from engine.protocol.wire import to_ext, to_json
from engine.remoting.errors import RemotingError


class AckStatus(enum.Enum):
    OK = "OK"
    NO_EXIST = "NO_EXIST"


class PopCalls(BrokerCalls):
    async def _pop_invoke(self, addr: str, cmd: RemotingCommand,
                          timeout: float) -> RemotingCommand:
        try:
            return await self.client.invoke(addr, cmd, timeout)
        except RemotingError as exc:
            raise UnreachableError([(addr, exc)], role="broker") from None

    async def pop(self, addr: str, broker_name: str,
                  header: PopMessageRequestHeader) -> PopResult:
        """POP_MESSAGE (held by the broker up to `header.poll_time` ms)."""
        cmd = await self._pop_invoke(addr, pop_request(header),
                                     header.poll_time / 1000 + self.timeout)
        return pop_result(cmd, header, broker_name, addr)

    async def peek(self, addr: str, broker_name: str, group: str, topic: str, queue_id: int,
                   max_nums: int) -> PopResult:
        """PEEK_MESSAGE: the next messages of a queue, without popping them."""
        header = PeekMessageRequestHeader(topic, queue_id, max_nums, group)
        cmd = await self._pop_invoke(addr, request(RequestCode.PEEK_MESSAGE, to_ext(header)),
                                     self.timeout)
        as_pop = PopMessageRequestHeader(group, topic, queue_id, max_nums, 0, 0, 0, 0)
        return pop_result(cmd, as_pop, broker_name, addr)

    async def ack(self, addr: str, group: str, topic: str, receipt: ExtraInfo) -> AckStatus:
        """ACK_MESSAGE of one popped message (`topic`: the one it was popped for)."""
        cmd = await self._pop_invoke(addr, ack_request(group, topic, receipt), self.timeout)
        return AckStatus.OK if cmd.code == ResponseCode.SUCCESS else AckStatus.NO_EXIST

    async def batch_ack(self, addr: str, group: str, topic: str,
                        receipts: Iterable[ExtraInfo]) -> AckStatus:
        """BATCH_ACK_MESSAGE of many popped messages of one broker."""
        body = batch_ack_body(group, topic, receipts)
        if not body.acks:
            return AckStatus.OK
        cmd = request(RequestCode.BATCH_ACK_MESSAGE, None, fastjson.dumpb(to_json(body)))
        resp = await self._pop_invoke(addr, cmd, self.timeout)
        return AckStatus.OK if resp.code == ResponseCode.SUCCESS else AckStatus.NO_EXIST

    async def change_invisible_time(self, addr: str, group: str, topic: str,
                                    receipt: ExtraInfo, invisible_ms: int
                                    ) -> tuple[AckStatus, ExtraInfo | None]:
        """CHANGE_MESSAGE_INVISIBLETIME: the message turns visible `invisible_ms` from now;
        returns its new receipt (None when the broker refused the old one)."""
        cmd = await self._pop_invoke(
            addr, change_invisible_request(group, topic, receipt, invisible_ms), self.timeout)
        assert receipt.queue_offset is not None  # change_invisible_request checked it
        if cmd.code != ResponseCode.SUCCESS:
            return AckStatus.NO_EXIST, None
        resp = decode_header(ChangeInvisibleTimeResponseHeader, cmd, addr)
        return AckStatus.OK, ExtraInfo(receipt.queue_offset, resp.pop_time, resp.invisible_time,
                                       resp.revive_qid, receipt.retry, receipt.broker_name,
                                       receipt.queue_id, receipt.queue_offset)

    async def notification(self, addr: str, group: str, topic: str, queue_id: int,
                           poll_ms: int, born_ms: int, *, order: bool = False,
                           attempt_id: str | None = None) -> NotificationResponseHeader:
        """NOTIFICATION: does the group have a message to pop (held up to `poll_ms`)?"""
        header = NotificationRequestHeader(group, topic, queue_id, poll_ms, born_ms, order,
                                           attempt_id)
        cmd = await self._call(addr, RequestCode.NOTIFICATION, to_ext(header),
                               timeout=poll_ms / 1000 + self.timeout)
        return decode_header(NotificationResponseHeader, cmd, addr)

    async def polling_info(self, addr: str, group: str, topic: str, queue_id: int) -> int:
        """POLLING_INFO: how many POP requests the broker holds for the queue."""
        header = PollingInfoRequestHeader(group, topic, queue_id)
        cmd = await self._call(addr, RequestCode.POLLING_INFO, to_ext(header))
        return decode_header(PollingInfoResponseHeader, cmd, addr).polling_num


def batch_ack_body(group: str, topic: str,
                   receipts: Iterable[ExtraInfo]) -> BatchAckMessageRequestBody:
    """One BatchAck per checkpoint, as 5.3's `batchAckMessageAsync` groups receipts."""
    grouped: dict[tuple[str, int, int, int], tuple[ExtraInfo, list[int]]] = {}
    broker: str | None = None
    for r in receipts:
        if r.queue_offset is None:
            raise ValueError("a receipt without the message's offset cannot be acked")
        broker = broker or r.broker_name
        key = (r.retry, r.queue_id, r.ck_queue_offset, r.pop_time)
        entry = grouped.setdefault(key, (r, []))
        entry[1].append(r.queue_offset - r.ck_queue_offset)
    acks = [BatchAck(group, topic, first.retry, first.ck_queue_offset, first.queue_id,
                     first.revive_qid, first.pop_time, first.invisible_time, encode_bits(bits))
            for first, bits in grouped.values()]
    return BatchAckMessageRequestBody(broker, acks)

"""`ClientAPI`: the broker requests producers and consumers make (Java's `MQClientAPIImpl`).

How this works: the offset queries come from `OffsetCalls` (shared with `BrokerAdmin`), the 5.x POP
requests from `PopCalls`; the rest are added here.  Every answered call maps a transport
failure to `UnreachableError` and an error code to its `ServerError`; oneway calls (offset
commits, END_TRANSACTION, unlocks in rebalance) only fail when the connection cannot be
opened or written.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.client.core.errors import UnreachableError
from engine.client.core.offset_calls import OffsetCalls
from engine.client.core.pop_calls import PopCalls
from engine.client.core.pull_codec import pull_result
from engine.client.core.results import PullResult, SendResult
from engine.client.core.send_codec import send_result
from engine.protocol import fastjson
from engine.protocol.body.admin import GetConsumerListByGroupResponseBody
from engine.protocol.body.check_client import CheckClientRequestBody
from engine.protocol.body.heartbeat import HeartbeatData, SubscriptionData
from engine.protocol.body.lock import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.codes import RequestCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.header.broker import (
    ConsumerSendMsgBackRequestHeader,
    EndTransactionRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from engine.protocol.wire import to_ext, to_json
from engine.remoting.errors import RemotingError

SEND_BACK_TIMEOUT = 5.0
LOCK_TIMEOUT = 1.0


class ClientAPI(OffsetCalls, PopCalls):
    """Requests of producers and consumers to one broker address each."""

    async def _invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        try:
            return await self.client.invoke(addr, cmd, timeout)
        except RemotingError as exc:
            raise UnreachableError([(addr, exc)], role="broker") from None

    async def _oneway(self, addr: str, cmd: RemotingCommand) -> None:
        try:
            await self.client.invoke_oneway(addr, cmd)
        except RemotingError as exc:
            raise UnreachableError([(addr, exc)], role="broker") from None

    # ------------------------------------------------------------------ send / pull

    async def send(self, addr: str, cmd: RemotingCommand, mq: MessageQueue, msg_id: str,
                   timeout: float) -> SendResult:
        """SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE, answered."""
        return send_result(await self._invoke(addr, cmd, timeout), mq, msg_id, addr)

    async def send_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        await self._oneway(addr, cmd)

    async def pull(self, addr: str, cmd: RemotingCommand, mq: MessageQueue,
                   sub: SubscriptionData | None, group: str, timeout: float) -> PullResult:
        """PULL_MESSAGE (built by `pull_codec.pull_request`)."""
        return pull_result(await self._invoke(addr, cmd, timeout), mq, sub, group, addr)

    # ------------------------------------------------------------------ membership

    async def heartbeat(self, addr: str, data: HeartbeatData) -> int:
        """HEART_BEAT; returns the broker's version (the answer's `version` field)."""
        resp = await self._call(addr, RequestCode.HEART_BEAT,
                                body=fastjson.dumpb(to_json(data)))
        return resp.version

    async def unregister_client(self, addr: str, client_id: str, *,
                                producer_group: str | None = None,
                                consumer_group: str | None = None) -> None:
        header = UnregisterClientRequestHeader(client_id, producer_group, consumer_group)
        await self._call(addr, RequestCode.UNREGISTER_CLIENT, to_ext(header))

    async def consumer_ids(self, addr: str, group: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP."""
        body = await self._body(GetConsumerListByGroupResponseBody, addr,
                                RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                {"consumerGroup": group})
        return list(body.consumer_id_list)

    async def check_client_config(self, addr: str, group: str, client_id: str,
                                  sub: SubscriptionData) -> None:
        """CHECK_CLIENT_CONFIG: does the broker accept a (non-TAG) subscription?"""
        body = CheckClientRequestBody(client_id, group, sub)
        await self._call(addr, RequestCode.CHECK_CLIENT_CONFIG,
                         body=fastjson.dumpb(to_json(body)))

    # ------------------------------------------------------------------ offsets

    async def commit_offset_oneway(self, addr: str, group: str, mq: MessageQueue,
                                   offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET, oneway (as `RemoteBrokerOffsetStore` sends it)."""
        header = UpdateConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, offset,
                                                   mq.broker_name)
        await self._oneway(addr, request(RequestCode.UPDATE_CONSUMER_OFFSET, to_ext(header)))

    # ------------------------------------------------------------------ orderly locks

    async def lock_batch(self, addr: str, group: str, client_id: str,
                         queues: Iterable[MessageQueue],
                         timeout: float = LOCK_TIMEOUT) -> set[MessageQueue]:
        """LOCK_BATCH_MQ; returns the queues this client now holds."""
        body = LockBatchRequestBody(group, client_id, frozenset(queues))
        answer = await self._body(LockBatchResponseBody, addr, RequestCode.LOCK_BATCH_MQ,
                                  body=fastjson.dumpb(to_json(body)), timeout=timeout)
        return set(answer.lock_ok_mq_set)

    async def unlock_batch(self, addr: str, group: str, client_id: str,
                           queues: Iterable[MessageQueue], *, oneway: bool) -> None:
        body = fastjson.dumpb(to_json(UnlockBatchRequestBody(group, client_id,
                                                             frozenset(queues))))
        if oneway:
            await self._oneway(addr, request(RequestCode.UNLOCK_BATCH_MQ, None, body))
        else:
            await self._call(addr, RequestCode.UNLOCK_BATCH_MQ, body=body, timeout=LOCK_TIMEOUT)

    # ------------------------------------------------------------------ retries, transactions

    async def send_back(self, addr: str, header: ConsumerSendMsgBackRequestHeader) -> None:
        """CONSUMER_SEND_MSG_BACK (timeout 5 s)."""
        await self._call(addr, RequestCode.CONSUMER_SEND_MSG_BACK, to_ext(header),
                         timeout=SEND_BACK_TIMEOUT)

    async def end_transaction_oneway(self, addr: str, header: EndTransactionRequestHeader,
                                     remark: str | None = None) -> None:
        cmd = request(RequestCode.END_TRANSACTION, to_ext(header), oneway=True)
        if remark is not None:
            cmd = RemotingCommand(code=cmd.code, flag=cmd.flag, remark=remark,
                                  ext_fields=cmd.ext_fields)
        await self._oneway(addr, cmd)

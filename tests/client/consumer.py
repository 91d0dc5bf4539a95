"""A stand-in consumer for admin tests: it heartbeats, records what the broker sends it, and
answers the calls a broker relays (running info, consume directly, status)."""

from __future__ import annotations

import asyncio
from types import TracebackType

from engine.protocol import fastjson
from engine.protocol.body.admin import (
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    GetConsumerStatusBody,
    ProcessQueueInfo,
)
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.wire import to_json
from engine.remoting.client import RemotingClient
from engine.remoting.router import RequestContext, Router
from tests.broker.helpers import heartbeat

#: The offset the consumer reports for every queue it is asked about.
REPORTED_OFFSET = 7


class FakeConsumer:
    """`async with FakeConsumer(addr, "C1", "CG", ("T",)) as consumer:` - online while open."""

    def __init__(self, broker_addr: str, client_id: str, group: str,
                 topics: tuple[str, ...]) -> None:
        self.broker_addr = broker_addr
        self.client_id = client_id
        self.group = group
        self.topics = topics
        self.calls: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        self.client = RemotingClient(self._router(), None)

    def _router(self) -> Router:
        router = Router()

        @router.handles(RequestCode.RESET_CONSUMER_CLIENT_OFFSET)
        def reset(ctx: RequestContext[None], cmd: RemotingCommand) -> None:
            self.calls.put_nowait(cmd)

        @router.handles(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
        def changed(ctx: RequestContext[None], cmd: RemotingCommand) -> None:
            return None

        @router.handles(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT)
        def status(ctx: RequestContext[None], cmd: RemotingCommand) -> RemotingCommand:
            self.calls.put_nowait(cmd)
            table = {MessageQueue(cmd.ext("topic") or "", "broker-a", 0): REPORTED_OFFSET}
            return cmd.response(body=fastjson.dumpb(to_json(GetConsumerStatusBody(table))))

        @router.handles(RequestCode.GET_CONSUMER_RUNNING_INFO)
        def running(ctx: RequestContext[None], cmd: RemotingCommand) -> RemotingCommand:
            self.calls.put_nowait(cmd)
            info = ConsumerRunningInfo(
                properties={"consumeType": "CONSUME_PASSIVELY", "clientId": self.client_id},
                mq_table={MessageQueue(t, "broker-a", 0): ProcessQueueInfo(commit_offset=3)
                          for t in self.topics},
                jstack="main thread" if cmd.ext("jstackEnable") == "true" else None)
            return cmd.response(body=fastjson.dumpb(to_json(info)))

        @router.handles(RequestCode.CONSUME_MESSAGE_DIRECTLY)
        def consume(ctx: RequestContext[None], cmd: RemotingCommand) -> RemotingCommand:
            self.calls.put_nowait(cmd)
            result = ConsumeMessageDirectlyResult(consume_result=CMResult.CR_SUCCESS,
                                                  remark=f"{len(cmd.body or b'')} bytes",
                                                  spent_time_mills=2)
            return cmd.response(body=fastjson.dumpb(to_json(result)))

        return router

    async def __aenter__(self) -> FakeConsumer:
        resp = await self.client.invoke(
            self.broker_addr,
            heartbeat(self.client_id, consumer_group=self.group, topics=self.topics), 5)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.client.close()

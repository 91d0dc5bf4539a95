"""Broker admin pulls: read a queue as Apache's tools do (`DefaultMQPullConsumer.pull`).

How this works: PULL_MESSAGE with the subscription carried in the request, no suspension and
no offset commit, in the group ``TOOLS_CONSUMER`` that every broker creates at start.  An
answer 0/19/20/21 becomes a `RecordPull` whose records are the stored records as
`QUERY_MESSAGE` returns them (bodies inflated, properties left raw), filtered again by exact
tag since the broker compares tag hash codes only.  A topic that may not be read (a
dead-letter topic made write-only by older brokers) raises `NoPermissionError`: read it entry
by entry with QUERY_CONSUME_QUEUE and VIEW_MESSAGE_BY_ID instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.client.admin.messages import parse_records
from engine.client.core.broker_call import BrokerCalls
from engine.client.core.errors import BadResponseError, UnreachableError, raise_for
from engine.client.core.pull_codec import pull_request, pull_sys_flag
from engine.client.core.results import PullStatus
from engine.protocol.body.heartbeat import SubscriptionData
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.message import MessageRecord
from engine.remoting.errors import RemotingError

#: `MixAll.TOOLS_CONSUMER_GROUP`: brokers create it at start, and it commits nothing.
TOOLS_GROUP = "TOOLS_CONSUMER"
PULL_BATCH = 32

_STATUS = {0: PullStatus.FOUND, 19: PullStatus.NO_NEW_MSG, 20: PullStatus.NO_MATCHED_MSG,
           21: PullStatus.OFFSET_ILLEGAL}


@dataclass(frozen=True, slots=True)
class RecordPull:
    """One pull's answer: status, where the next pull starts, the queue's bounds, records."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    records: list[MessageRecord] = field(default_factory=list)


def tags_of(expression: str) -> frozenset[str] | None:
    """The tags of a TAG expression (``a || b``), None for every tag (``*`` or empty)."""
    if not expression or expression.strip() == "*":
        return None
    return frozenset(t.strip() for t in expression.split("||") if t.strip())


class PullCalls(BrokerCalls):
    """Pulls of one queue without a consumer behind them."""

    async def pull_records(self, addr: str, mq: MessageQueue, offset: int, *,
                           max_nums: int = PULL_BATCH, expression: str = "*",
                           group: str = TOOLS_GROUP,
                           timeout: float | None = None) -> RecordPull:
        """PULL_MESSAGE of up to `max_nums` records of `mq` from `offset`, not suspended.

        Raises:
            NoPermissionError: the topic may not be read.
            ServerError: any other refusal (no such group, ...).
            UnreachableError: the broker did not answer.
            BadResponseError: the answer does not decode.
        """
        sub = SubscriptionData.build(mq.topic, expression or "*", sub_version=0)
        flag = pull_sys_flag(commit_offset=False, suspend=False, subscription=True)
        cmd = pull_request(group, mq, offset, sub, max_nums=max_nums, sys_flag=flag,
                           commit_offset=0, suspend_ms=0)
        try:
            resp = await self.client.invoke(addr, cmd,
                                            self.timeout if timeout is None else timeout)
        except RemotingError as exc:
            raise UnreachableError([(addr, exc)], role="broker") from None
        status = _STATUS.get(resp.code)
        if status is None:
            raise_for(resp, addr)
            raise BadResponseError(f"pull answered code {resp.code}", addr)
        ext = resp.ext_fields or {}
        try:
            bounds = (int(ext["nextBeginOffset"]), int(ext["minOffset"]),
                      int(ext["maxOffset"]))
        except (KeyError, ValueError) as exc:
            raise BadResponseError(f"pull answer lacks its header: {exc}", addr) from None
        records: list[MessageRecord] = []
        if status is PullStatus.FOUND:
            wanted = tags_of(expression)
            records = [r for r in parse_records(resp.body, addr)
                       if wanted is None or (r.tags or "") in wanted]
        return RecordPull(status, *bounds, records)

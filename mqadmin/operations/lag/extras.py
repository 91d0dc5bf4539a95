"""What the lag collector reads for its /metrics beyond the samples: the brokers' members and
runtime figures, each group's online consumers, and the dead letters.

How this works: only a collector started with a metrics port reads these, in a duty after
each cycle (never inside it), through the admin reads Apache 4.9/5.x brokers answer (the same
rocketmq-exporter makes): the name servers' cluster info names every broker address and
its cluster; GET_BROKER_RUNTIME_INFO of each address gives the disk ratio and the commit
log's offsets (a slave's distance behind its master is the difference of the maxima);
GET_CONSUMER_CONNECTION_LIST of each group on one broker holding its queues gives its
clients and message model; each broker's topic table (GET_ALL_TOPIC_CONFIG) names the
``%DLQ%`` topics it holds and GET_TOPIC_STATS_INFO their offsets.  Dead letters the ledger
records as resent or discarded (`mqadmin dlq resend/discard`) and still in the queue are
handled; the rest are unhandled.  Whatever does not answer is left out, never a zero.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from engine.client.admin import MQAdmin
from engine.client.errors import ConsumerNotOnlineError
from engine.protocol.body.heartbeat import MessageModel
from engine.protocol.body.route import ClusterInfo
from mqadmin.operations.dlq.ledger import Ledger
from mqadmin.operations.lag.model import Cycle
from mqadmin.operations.lag.sample import Errors
from mqadmin.operations.lag.status import LagReport
from mqadmin.operations.targets import DLQ_PREFIX

T = TypeVar("T")
R = TypeVar("R")
MASTER_ID = 0


@dataclass(frozen=True, slots=True)
class BrokerNode:
    """One broker address as the name servers list it, and its runtime figures (empty
    when it did not answer)."""

    cluster: str
    broker: str  # the broker name (master and slaves share it)
    broker_id: int
    addr: str
    runtime: Mapping[str, str] = field(default_factory=dict)

    def number(self, key: str) -> float | None:
        try:
            return float(self.runtime[key])
        except (KeyError, ValueError):
            return None


@dataclass(frozen=True, slots=True)
class Consumers:
    """A group's online clients as one broker sees them."""

    group: str
    client_addrs: tuple[str, ...] = ()
    client_ids: tuple[str, ...] = ()
    model: MessageModel = MessageModel.CLUSTERING


@dataclass(frozen=True, slots=True)
class DeadLetters:
    """A group's ``%DLQ%`` queues on one broker: the sum of their max offsets (what
    rocketmq-exporter shows), the messages still stored, and of those how many the ledger
    has not handled."""

    group: str
    broker: str
    cluster: str
    max_offset: int
    stored: int
    unhandled: int


@dataclass(frozen=True, slots=True)
class Extras:
    """One round of the metrics reads (empty until the first)."""

    nodes: tuple[BrokerNode, ...] = ()
    consumers: Mapping[str, Consumers] = field(default_factory=dict)  # by group; known only
    dead_letters: tuple[DeadLetters, ...] = ()


async def _each(gate: asyncio.Semaphore, items: Sequence[T],
                call: Callable[[T], Awaitable[R]]) -> list[R | None]:
    """`call` on every item, `gate` at a time; None where it failed."""
    async def one(item: T) -> R | None:
        async with gate:
            try:
                return await call(item)
            except Errors:
                return None
    return list(await asyncio.gather(*(one(i) for i in items)))


def _nodes(info: ClusterInfo) -> list[BrokerNode]:
    return [BrokerNode(d.cluster, name, bid, addr)
            for name, d in sorted(info.broker_addr_table.items())
            for bid, addr in sorted(d.broker_addrs.items())]


async def read_extras(admin: MQAdmin, cycle: Cycle, ledger_scope: str | None,
                      concurrency: int) -> Extras:
    """The brokers, the consumers of the cycle's groups and the dead letters, now.

    Raises:
        ClientError, TimeoutError, OSError: the name servers did not answer.
    """
    gate = asyncio.Semaphore(concurrency)
    nodes = _nodes(await admin.namesrv.cluster_info())
    runtimes = await _each(gate, nodes, lambda n: admin.broker.runtime_info(n.addr))
    nodes = [BrokerNode(n.cluster, n.broker, n.broker_id, n.addr, r.table) if r else n
             for n, r in zip(nodes, runtimes, strict=True)]
    masters = {n.broker: n.addr for n in nodes if n.broker_id == MASTER_ID}
    consumers = await _consumers(admin, cycle, masters, gate)
    letters = await _dead_letters(admin, nodes, masters, ledger_scope, gate)
    return Extras(tuple(nodes), consumers, tuple(letters))


async def _consumers(admin: MQAdmin, cycle: Cycle, masters: Mapping[str, str],
                     gate: asyncio.Semaphore) -> dict[str, Consumers]:
    where: dict[str, str] = {}
    for s in cycle.samples:
        if s.group not in where and s.broker in masters:
            where[s.group] = masters[s.broker]
    groups = sorted(where)

    async def ask(group: str) -> Consumers:
        try:
            found = await admin.broker.consumer_connections(where[group], group)
        except ConsumerNotOnlineError:
            return Consumers(group)
        conns = sorted(found.connection_set, key=lambda c: c.client_id)
        return Consumers(group, tuple(c.client_addr for c in conns),
                         tuple(c.client_id for c in conns),
                         found.message_model or MessageModel.CLUSTERING)

    answers = await _each(gate, groups, ask)
    return {g: a for g, a in zip(groups, answers, strict=True) if a is not None}


async def _dead_letters(admin: MQAdmin, nodes: Sequence[BrokerNode],
                        masters: Mapping[str, str], ledger_scope: str | None,
                        gate: asyncio.Semaphore) -> list[DeadLetters]:
    brokers = sorted(masters)
    tables = await _each(gate, brokers, lambda b: admin.broker.all_topic_config(masters[b]))
    wanted = [(b, t) for b, table in zip(brokers, tables, strict=True) if table is not None
              for t in sorted(table.topic_config_table) if t.startswith(DLQ_PREFIX)]
    stats = await _each(gate, wanted, lambda bt: admin.broker.topic_stats(masters[bt[0]], bt[1]))
    groups = sorted({t[len(DLQ_PREFIX):] for _, t in wanted})
    handled = await asyncio.to_thread(_handled, ledger_scope, groups) if groups else {}
    cluster = {n.broker: n.cluster for n in nodes}
    out: list[DeadLetters] = []
    for (broker, topic), table in zip(wanted, stats, strict=True):
        if table is None:
            continue
        group = topic[len(DLQ_PREFIX):]
        top = stored = done = 0
        for mq, o in table.offset_table.items():
            top += o.max_offset
            stored += max(o.max_offset - o.min_offset, 0)
            done += sum(1 for b, q, off in handled.get(group, ())
                        if b == broker and q == mq.queue_id and o.min_offset <= off < o.max_offset)
        out.append(DeadLetters(group, broker, cluster.get(broker, ""), top, stored,
                               max(stored - done, 0)))
    return out


def _handled(scope: str | None, groups: Sequence[str]
             ) -> dict[str, list[tuple[str, int, int]]]:
    """(broker, queue id, offset) of each group's dead letters the ledger of `scope`
    handled (opened here: a SQLite connection stays in the thread that made it)."""
    if scope is None:
        return {}
    out: dict[str, list[tuple[str, int, int]]] = {}
    with Ledger(scope) as ledger:
        for g in groups:
            keys = []
            for key in ledger.handled(g):
                broker, qid, offset = key.rsplit(":", 2)
                keys.append((broker, int(qid), int(offset)))
            out[g] = keys
    return out


@dataclass(frozen=True, slots=True)
class Latest:
    """The collector's latest cycle as /metrics reads it: set in one assignment at the end
    of a cycle, so a scrape sees one cycle's values whatever thread it runs in."""

    cycle: Cycle
    report: LagReport
    extras: Extras
    cycles: int  # cycles done, this one included
    allowed_lag: int

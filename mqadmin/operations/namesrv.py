"""Name-server reads and mutations of mqadmin: plain async functions over `NamesrvAdmin`.

How this works: reads return rows (``list[dict]`` with the keys named in the ``*_COLUMNS``
tuples) for the renderer.  A mutation is a `Mutation`: how to read the state it changes on
one name server, how to show that state, when it counts as done, and how to apply it.
`plan` reads every server, `apply` changes every server the plan could read and then reads
each again to verify, and `settle` turns failures into the right `CliError`.  Name servers
do not share state, so every change is made on each of them, as Apache's mqadmin does.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from engine.client.errors import ClientError, NotFoundError, TopicNotExistError
from engine.client.namesrv import NamesrvAdmin, ServerOutcome
from engine.protocol.perm import is_writeable
from mqadmin.exit_codes import NotVerified, ServersFailed, TargetNotFound

Row = dict[str, Any]
S = TypeVar("S")

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
#: Route lookups run at once while reading a broker's topics.
ROUTE_CONCURRENCY = 16

CLUSTER_COLUMNS = ("cluster", "brokerName", "brokerId", "addr")
TOPIC_COLUMNS = ("topic",)
TOPIC_CLUSTER_COLUMNS = ("cluster", "topic")
ROUTE_COLUMNS = ("topic", "cluster", "brokerName", "brokerId", "addr", "readQueueNums",
                 "writeQueueNums", "perm", "topicSysFlag")
CONFIG_COLUMNS = ("nameServer", "key", "value")
PLAN_COLUMNS = ("nameServer", "target", "before", "after")
RESULT_COLUMNS = ("nameServer", "target", "before", "after", "result", "verified")


# ---------------------------------------------------------------------------- reads


async def cluster_list(admin: NamesrvAdmin) -> list[Row]:
    """One row per broker address, by cluster, broker name and broker id."""
    info = await admin.cluster_info()
    rows: list[Row] = []
    for cluster in sorted(info.cluster_addr_table):
        for name in sorted(info.cluster_addr_table[cluster]):
            data = info.broker_addr_table.get(name)
            if data is None:
                continue
            for broker_id in sorted(data.broker_addrs):
                rows.append({"cluster": cluster, "brokerName": name, "brokerId": broker_id,
                             "addr": data.broker_addrs[broker_id]})
    return rows


async def topic_list(admin: NamesrvAdmin, *, with_cluster: bool = False) -> list[Row]:
    """Every topic; with `with_cluster`, one row per (cluster, topic) and, like Apache's
    ``topicList -c``, without retry and dead-letter topics.  Consumer groups need a broker
    call (QUERY_TOPIC_CONSUME_BY_WHO) and are not shown yet."""
    topics = sorted((await admin.all_topics()).topic_list)
    if not with_cluster:
        return [{"topic": topic} for topic in topics]
    info = await admin.cluster_info()
    clusters = sorted(info.cluster_addr_table)
    lists = await asyncio.gather(*(admin.topics_by_cluster(c) for c in clusters))
    clusters_of: dict[str, list[str]] = defaultdict(list)
    for cluster, listed in zip(clusters, lists, strict=True):
        for topic in listed.topic_list:
            clusters_of[topic].append(cluster)
    return [{"cluster": cluster, "topic": topic}
            for topic in topics if not topic.startswith((RETRY_PREFIX, DLQ_PREFIX))
            for cluster in clusters_of.get(topic) or [""]]


async def topic_route(admin: NamesrvAdmin, topic: str) -> list[Row]:
    """One row per broker address serving `topic`, with that broker's queue data.

    Raises:
        TopicNotExistError: no broker serves the topic.
    """
    route = await admin.topic_route(topic)
    queues = {q.broker_name: q for q in route.queue_datas}
    brokers = {b.broker_name: b for b in route.broker_datas}
    rows: list[Row] = []
    for name in sorted(queues.keys() | brokers.keys()):
        queue, broker = queues.get(name), brokers.get(name)
        addrs: list[tuple[int | None, str | None]] = (
            sorted(broker.broker_addrs.items()) if broker and broker.broker_addrs
            else [(None, None)])
        for broker_id, addr in addrs:
            rows.append({
                "topic": topic, "cluster": broker.cluster if broker else None,
                "brokerName": name, "brokerId": broker_id, "addr": addr,
                "readQueueNums": queue.read_queue_nums if queue else None,
                "writeQueueNums": queue.write_queue_nums if queue else None,
                "perm": queue.perm if queue else None,
                "topicSysFlag": queue.topic_sys_flag if queue else None,
            })
    return rows


@dataclass(frozen=True, slots=True)
class Gathered:
    """Rows from every name server that answered, and the ones that did not."""

    rows: list[Row]
    failures: list[tuple[str, ClientError]] = field(default_factory=list)
    total: int = 0


async def namesrv_config(admin: NamesrvAdmin) -> Gathered:
    """Every setting of every name server (Apache prints one block per server)."""
    outcomes = await admin.on_each(lambda addr: admin.get_config(addr=addr))
    rows = [{"nameServer": o.addr, "key": key, "value": value}
            for o in outcomes if o.value is not None for key, value in o.value.items()]
    return Gathered(rows, _failures(outcomes), len(outcomes))


def _failures(outcomes: Sequence[ServerOutcome[Any]]) -> list[tuple[str, ClientError]]:
    return [(o.addr, o.error) for o in outcomes if o.error is not None]


def settle(what: str, gathered: Gathered) -> None:
    """Raise `ServersFailed` (PARTIAL when some answered) if any server failed."""
    if gathered.failures:
        raise ServersFailed(what, gathered.failures, gathered.total)


# ---------------------------------------------------------------------------- mutations


@dataclass(frozen=True, slots=True)
class Mutation(Generic[S]):
    """One change, made on each name server; `S` is the state it reads back."""

    action: str  # Apache's command name, for messages
    target: str  # what changes, as shown in the plan
    after: str  # the promised state, as shown in the plan
    read: Callable[[str], Awaitable[S]]  # state on one name server (by address)
    show: Callable[[S], str]
    done: Callable[[S], bool]  # does this state mean the change took effect?
    apply: Callable[[str], Awaitable[str]]  # make the change on one server; what it reported
    #: Refuses the plan given the states read (raise a `CliError`), e.g. an unknown broker.
    validate: Callable[[list[S]], None] | None = None


@dataclass(frozen=True, slots=True)
class Plan(Generic[S]):
    mutation: Mutation[S]
    before: list[ServerOutcome[S]]

    def rebind(self, mutation: Mutation[S]) -> Plan[S]:
        """The same plan with the same mutation built over another admin (a new loop)."""
        return Plan(mutation, self.before)

    def state(self, addr: str) -> S:
        """The state read on `addr` (which must have been readable)."""
        outcome = next(o for o in self.before if o.addr == addr)
        return cast(S, outcome.value)

    @property
    def rows(self) -> list[Row]:
        m = self.mutation
        return [{"nameServer": o.addr, "target": m.target,
                 "before": m.show(self.state(o.addr)) if o.ok else f"(unreadable: {o.error})",
                 "after": m.after if o.ok else "(skipped)"}
                for o in self.before]


@dataclass(frozen=True, slots=True)
class Applied:
    action: str
    rows: list[Row]
    failures: list[tuple[str, ClientError]]
    unverified: list[str]
    total: int


async def plan(admin: NamesrvAdmin, mutation: Mutation[S]) -> Plan[S]:
    """Read the current state on every name server.

    Raises:
        ServersFailed: no name server could be read (nothing to change).
    """
    outcomes = await admin.on_each(mutation.read)
    if not any(o.ok for o in outcomes):
        raise ServersFailed(mutation.action, _failures(outcomes), len(outcomes))
    if mutation.validate is not None:
        mutation.validate([cast(S, o.value) for o in outcomes if o.ok])
    return Plan(mutation, outcomes)


async def apply(admin: NamesrvAdmin, planned: Plan[S]) -> Applied:
    """Apply on every server the plan could read, then re-read each to verify."""
    m = planned.mutation
    targets = [o.addr for o in planned.before if o.ok]

    async def change_and_verify(addr: str) -> tuple[str, S]:
        result = await m.apply(addr)
        return result, await m.read(addr)

    done = await asyncio.gather(*(_outcome(a, change_and_verify(a)) for a in targets))
    failures = _failures(planned.before) + _failures(done)
    rows: list[Row] = []
    unverified: list[str] = []
    for outcome in done:
        if outcome.value is None:
            continue
        result, state = outcome.value
        verified = m.done(state)
        if not verified:
            unverified.append(outcome.addr)
        rows.append({"nameServer": outcome.addr, "target": m.target,
                     "before": m.show(planned.state(outcome.addr)),
                     "after": m.show(state), "result": result, "verified": verified})
    return Applied(m.action, rows, failures, unverified, len(planned.before))


async def _outcome(addr: str, work: Awaitable[S]) -> ServerOutcome[S]:
    try:
        return ServerOutcome(addr, await work)
    except ClientError as exc:
        return ServerOutcome(addr, error=exc)


def settle_applied(applied: Applied) -> None:
    """Raise what the outcome calls for: `ServersFailed` (partial or total), or
    `NotVerified` when a server accepted the change but re-reading shows it missing."""
    if applied.failures:
        raise ServersFailed(applied.action, applied.failures, applied.total)
    if applied.unverified:
        raise NotVerified(
            f"{applied.action}: {', '.join(applied.unverified)} accepted the change, but "
            "reading it back shows the old state (some servers ignore unknown keys). Check "
            "the name with the matching get/list command and the server's log.")


# ---------------------------------------------------------------------------- the mutations

ABSENT = "(absent)"


def _show_value(value: str | None) -> str:
    return ABSENT if value is None else value


async def _kv_value(admin: NamesrvAdmin, namespace: str, key: str, addr: str) -> str | None:
    try:
        return await admin.get_kv_config(namespace, key, addr=addr)
    except NotFoundError:
        return None


def update_kv_config(admin: NamesrvAdmin, namespace: str, key: str,
                     value: str) -> Mutation[str | None]:
    async def put(addr: str) -> str:
        await admin.put_kv_config(namespace, key, value, addr=addr)
        return "OK"

    return Mutation(
        "updateKvConfig", f"{namespace}/{key}", value,
        read=lambda addr: _kv_value(admin, namespace, key, addr),
        show=_show_value, done=lambda state: state == value, apply=put)


def delete_kv_config(admin: NamesrvAdmin, namespace: str, key: str) -> Mutation[str | None]:
    async def delete(addr: str) -> str:
        await admin.delete_kv_config(namespace, key, addr=addr)
        return "OK"

    return Mutation(
        "deleteKvConfig", f"{namespace}/{key}", ABSENT,
        read=lambda addr: _kv_value(admin, namespace, key, addr),
        show=_show_value, done=lambda state: state is None, apply=delete)


def update_namesrv_config(admin: NamesrvAdmin, key: str, value: str) -> Mutation[str | None]:
    async def current(addr: str) -> str | None:
        return (await admin.get_config(addr=addr)).get(key)

    async def update(addr: str) -> str:
        await admin.update_config({key: value}, addr=addr)
        return "OK"

    def took_effect(state: str | None) -> bool:
        # Servers re-print booleans in their own case (TRUE -> true).
        return state is not None and state.strip().lower() == value.strip().lower()

    return Mutation("updateNamesrvConfig", key, value, read=current, show=_show_value,
                    done=took_effect, apply=update)


@dataclass(frozen=True, slots=True)
class WritePerm:
    """A broker's topics on one name server: how many there are, how many are writable."""

    registered: bool
    topics: int = 0
    writable: int = 0

    def show(self) -> str:
        if not self.registered:
            return "(broker not registered)"
        return f"{self.writable}/{self.topics} topics writable"


async def write_perm_state(admin: NamesrvAdmin, broker_name: str, addr: str) -> WritePerm:
    """Count the topics of `broker_name` on the name server at `addr`, and the writable ones."""
    info = await admin.cluster_info(addr=addr)
    clusters = sorted(c for c, names in info.cluster_addr_table.items() if broker_name in names)
    if not clusters and broker_name not in info.broker_addr_table:
        return WritePerm(registered=False)
    names: set[str] = set()
    for cluster in clusters:
        names.update((await admin.topics_by_cluster(cluster, addr=addr)).topic_list)
    gate = asyncio.Semaphore(ROUTE_CONCURRENCY)

    async def perm_of(topic: str) -> int | None:
        async with gate:
            try:
                route = await admin.topic_route(topic, addr=addr)
            except TopicNotExistError:  # deleted meanwhile
                return None
        return next((q.perm for q in route.queue_datas if q.broker_name == broker_name), None)

    perms = [p for p in await asyncio.gather(*(perm_of(t) for t in sorted(names)))
             if p is not None]
    return WritePerm(True, len(perms), sum(1 for p in perms if is_writeable(p)))


def _write_perm(admin: NamesrvAdmin, broker_name: str, *, wipe: bool) -> Mutation[WritePerm]:
    async def change(addr: str) -> str:
        if wipe:
            count = await admin.wipe_write_perm(broker_name, addr=addr)
            return f"wiped write perm of {count} topics"
        count = await admin.add_write_perm(broker_name, addr=addr)
        return f"added write perm to {count} topics"

    def took_effect(state: WritePerm) -> bool:
        if not state.registered:
            return True  # nothing of this broker to change on that server
        return state.writable == (0 if wipe else state.topics)

    return Mutation(
        "wipeWritePerm" if wipe else "addWritePerm", broker_name,
        "no topic writable" if wipe else "every topic writable",
        read=lambda addr: write_perm_state(admin, broker_name, addr),
        show=WritePerm.show, done=took_effect, apply=change,
        validate=lambda states: _require_registered(broker_name, states))


def wipe_write_perm(admin: NamesrvAdmin, broker_name: str) -> Mutation[WritePerm]:
    return _write_perm(admin, broker_name, wipe=True)


def add_write_perm(admin: NamesrvAdmin, broker_name: str) -> Mutation[WritePerm]:
    return _write_perm(admin, broker_name, wipe=False)


def _require_registered(broker_name: str, states: list[WritePerm]) -> None:
    """Refuse a write-perm change for a broker no name server knows.

    Raises:
        TargetNotFound: every readable name server lacks the broker.
    """
    if not any(state.registered for state in states):
        raise TargetNotFound(
            f"broker '{broker_name}' is not registered on any name server. "
            "List the broker names with `mqadmin clusterList`.")

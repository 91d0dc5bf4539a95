"""Name-server reads and mutations of mqadmin: plain async functions over `NamesrvAdmin`.

How this works: reads return rows (``list[dict]`` with the keys named in the ``*_COLUMNS``
tuples) for the renderer.  A mutation is a `Mutation` (mutation.py) whose servers are the
name servers: name servers do not share state, so every change is made on each of them, as
Apache's mqadmin does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from engine.client.errors import NotFoundError, TopicNotExistError
from engine.client.namesrv import NamesrvAdmin, ServerOutcome
from engine.protocol.body.route import ClusterInfo
from engine.protocol.perm import is_writeable
from mqadmin.exit_codes import TargetNotFound
from mqadmin.operations.mutation import Gathered, Mutation, failures_of

Row = dict[str, Any]
S = TypeVar("S")

#: Route lookups run at once while reading a broker's topics.
ROUTE_CONCURRENCY = 16

CONFIG_COLUMNS = ("nameServer", "key", "value")
ROLE = "nameServer"


# ---------------------------------------------------------------------------- reads


async def namesrv_config(admin: NamesrvAdmin) -> Gathered:
    """Every setting of every name server (Apache prints one block per server)."""
    outcomes = await admin.on_each(lambda addr: admin.get_config(addr=addr))
    rows = [{"nameServer": o.addr, "key": key, "value": value}
            for o in outcomes if o.value is not None for key, value in o.value.items()]
    return Gathered(rows, failures_of(outcomes), len(outcomes))


async def cluster_listings(admin: NamesrvAdmin
                           ) -> tuple[ClusterInfo, list[ServerOutcome[ClusterInfo]]]:
    """The cluster as the first name server that answers lists it, and each name server's
    answer (they do not share state: one may know brokers another lost).

    Raises:
        ClientError: no name server answered (the first one's error).
    """
    outcomes = await admin.on_each(lambda addr: admin.cluster_info(addr=addr))
    for outcome in outcomes:
        if outcome.value is not None:
            return outcome.value, outcomes
    error = outcomes[0].error
    assert error is not None
    raise error


# ---------------------------------------------------------------------------- the mutations

ABSENT = "(absent)"


def _on_each(admin: NamesrvAdmin) -> Callable[[], Awaitable[list[str]]]:
    async def servers() -> list[str]:
        return list(admin.addrs)
    return servers


def _show_value(value: str | None) -> str:
    return ABSENT if value is None else value


async def _kv_value(admin: NamesrvAdmin, namespace: str, key: str, addr: str) -> str | None:
    try:
        return await admin.get_kv_config(namespace, key, addr=addr)
    except NotFoundError:
        return None


def update_kv_config(admin: NamesrvAdmin, namespace: str, key: str, value: str, *,
                     action: str = "updateKvConfig") -> Mutation[str | None]:
    async def put(addr: str) -> str:
        await admin.put_kv_config(namespace, key, value, addr=addr)
        return "OK"

    return Mutation(
        action, f"{namespace}/{key}", servers=_on_each(admin),
        read=lambda addr: _kv_value(admin, namespace, key, addr),
        show=_show_value, done=lambda _, state: state == value, apply=put, after=value,
        role=ROLE)


def delete_kv_config(admin: NamesrvAdmin, namespace: str, key: str, *,
                     action: str = "deleteKvConfig") -> Mutation[str | None]:
    async def delete(addr: str) -> str:
        await admin.delete_kv_config(namespace, key, addr=addr)
        return "OK"

    return Mutation(
        action, f"{namespace}/{key}", servers=_on_each(admin),
        read=lambda addr: _kv_value(admin, namespace, key, addr),
        show=_show_value, done=lambda _, state: state is None, apply=delete, after=ABSENT,
        role=ROLE)


def update_namesrv_config(admin: NamesrvAdmin, key: str, value: str) -> Mutation[str | None]:
    async def current(addr: str) -> str | None:
        return (await admin.get_config(addr=addr)).get(key)

    async def update(addr: str) -> str:
        await admin.update_config({key: value}, addr=addr)
        return "OK"

    def took_effect(_: str | None, state: str | None) -> bool:
        # Servers re-print booleans in their own case (TRUE -> true).
        return state is not None and state.strip().lower() == value.strip().lower()

    return Mutation("updateNamesrvConfig", key, servers=_on_each(admin), read=current,
                    show=_show_value, done=took_effect, apply=update, after=value, role=ROLE)


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

    def took_effect(_: WritePerm, state: WritePerm) -> bool:
        if not state.registered:
            return True  # nothing of this broker to change on that server
        return state.writable == (0 if wipe else state.topics)

    return Mutation(
        "wipeWritePerm" if wipe else "addWritePerm", broker_name, servers=_on_each(admin),
        read=lambda addr: write_perm_state(admin, broker_name, addr),
        show=WritePerm.show, done=took_effect, apply=change,
        after="no topic writable" if wipe else "every topic writable",
        validate=lambda states: _require_registered(broker_name, states), role=ROLE)


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

"""Consumer-group mutations: updateSubGroup, deleteSubGroup, resetOffsetByTime,
skipAccumulatedMessage, cloneGroupOffset.

How this works: group configs and committed offsets live on each broker (slaves copy their
master's), so every mutation here goes to masters: those of a cluster, or those of a
topic's route.  Offset mutations read each queue's committed offset and the offset it will
move to before anything changes (SEARCH_OFFSET_BY_TIMESTAMP, or the queue's end), so the
plan shows queue by queue what will happen, and verification compares the offsets read
back with that plan.  A reset goes through the broker, which tells online consumers; when
none is online (CONSUMER_NOT_ONLINE) the committed offsets are written queue by queue, as
Apache's mqadmin falls back to doing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from engine.client.admin import MQAdmin
from engine.client.broker_admin import RESET_TO_MAX
from engine.client.errors import ClientError, ConsumerNotOnlineError, TopicNotExistError
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.body.topic import TopicConfig
from mqadmin.exit_codes import TargetNotFound
from mqadmin.operations.mutation import Mutation
from mqadmin.operations.targets import (
    brokers_of,
    dlq_topic,
    masters,
    retry_topic,
    route_brokers,
)
from mqadmin.operations.topic_attributes import refuse_without_attributes, show_attributes

# ---------------------------------------------------------------------------- groups


def show_group(config: SubscriptionGroupConfig | None) -> str:
    """A group's config as updateSubGroup sets it, in Apache's names (`consumeEnable=true
    ... retryMaxTimes=16 ...`), "(absent)" when the broker keeps none: the CLI's plans and
    the dashboard's group screen show it."""
    if config is None:
        return "(absent)"
    fields = (("consumeEnable", config.consume_enable),
              ("consumeFromMinEnable", config.consume_from_min_enable),
              ("consumeBroadcastEnable", config.consume_broadcast_enable),
              ("consumeMessageOrderly", config.orderly),
              ("retryQueueNums", config.retry_queue_nums),
              ("retryMaxTimes", config.retry_max_times), ("brokerId", config.broker_id),
              ("whichBrokerWhenConsumeSlowly", config.which_broker_when_consume_slowly),
              ("notifyConsumerIdsChangedEnable", config.notify_consumer_ids_changed_enable))
    shown = " ".join(f"{name}={str(v).lower() if isinstance(v, bool) else v}"
                     for name, v in fields)
    attributes = show_attributes(config.attributes)
    return shown + (f" attributes={attributes}" if attributes else "")


async def broker_group(admin: MQAdmin, addr: str, group: str) -> SubscriptionGroupConfig | None:
    return (await admin.broker.all_group_config(addr)).subscription_group_table.get(group)


async def group_configs(admin: MQAdmin, group: str) -> dict[str, SubscriptionGroupConfig | None]:
    """The group's config on each broker (its master, else a slave), by the address of those
    that answered (None: that broker keeps no config of the group)."""
    addrs = list((await masters(admin, or_slave=True)).values())
    outcomes = await admin.on_brokers(addrs, lambda addr: broker_group(admin, addr, group))
    return {o.addr: o.value for o in outcomes if o.error is None}


def update_sub_group(admin: MQAdmin, config: SubscriptionGroupConfig, *,
                     broker_addr: str | None, cluster: str | None
                     ) -> Mutation[SubscriptionGroupConfig | None]:
    """Create or replace a group's config on a broker or every master of a cluster; a
    non-default retryQueueNums also resizes the group's retry topic there, as Apache does."""
    group = config.group_name

    async def change(addr: str) -> str:
        if config.orderly or config.attributes:  # 5.x settings a 4.x broker would drop
            await refuse_without_attributes(
                addr, admin.broker.group_config(addr, group),
                "consumeMessageOrderly (-o) or group attributes")
        await admin.broker.create_group(addr, config)
        if config.retry_queue_nums != SubscriptionGroupConfig(group).retry_queue_nums:
            retry = (await admin.broker.all_topic_config(addr)).topic_config_table.get(
                retry_topic(group))
            if retry is not None and retry.write_queue_nums != config.retry_queue_nums:
                await admin.broker.create_topic(addr, TopicConfig(
                    retry.topic_name, config.retry_queue_nums, config.retry_queue_nums,
                    retry.perm))
                return f"OK, {retry.topic_name} resized"
        return "OK"

    return Mutation("updateSubGroup", group,
                    servers=brokers_of(admin, broker_addr, cluster,
                                       masters_only="subscription groups"),
                    read=lambda addr: broker_group(admin, addr, group), show=show_group,
                    done=lambda _, s: _unsigned(s) == _unsigned(config), apply=change,
                    after=show_group(config),
                    role="broker")


def _unsigned(config: SubscriptionGroupConfig | None) -> SubscriptionGroupConfig | None:
    """The config without its attributes: sent as signed changes, read back as stored."""
    return replace(config, attributes=None) if config is not None else None


@dataclass(frozen=True, slots=True)
class GroupState:
    on_namesrv: bool
    config: SubscriptionGroupConfig | None = None  # broker
    topics: tuple[str, ...] = ()  # the group's retry/DLQ topics still there

    def show(self) -> str:
        topics = f" topics={','.join(self.topics)}" if self.topics else ""
        if self.on_namesrv:
            return f"routes:{topics or ' (none)'}"
        return ("present" if self.config is not None else "(absent)") + topics


def delete_sub_group(admin: MQAdmin, group: str, *, broker_addr: str | None,
                     cluster: str | None, remove_offset: bool) -> Mutation[GroupState]:
    """Delete a group on a broker or every master of a cluster; with a cluster also its
    retry and dead-letter topics, on the masters and then the name servers (Apache 4.9)."""
    brokers: list[str] = []
    topics = (retry_topic(group), dlq_topic(group))

    async def servers() -> list[str]:
        brokers.extend([broker_addr] if broker_addr else
                       (await masters(admin, cluster or "")).values())
        return brokers + (list(admin.namesrv.addrs) if cluster else [])

    async def read(addr: str) -> GroupState:
        if addr in brokers:
            config = await broker_group(admin, addr, group)
            table = (await admin.broker.all_topic_config(addr)).topic_config_table
            left = tuple(t for t in topics if t in table) if cluster else ()
            return GroupState(False, config, left)
        present = []
        for topic in topics:
            try:
                route = await admin.namesrv.topic_route(topic, addr=addr)
            except TopicNotExistError:
                continue
            if any(d.cluster == cluster for d in route.broker_datas):
                present.append(topic)
        return GroupState(True, topics=tuple(present))

    async def change(addr: str) -> str:
        if addr in brokers:
            await admin.broker.delete_group(addr, group, remove_offsets=remove_offset)
            if cluster:
                for topic in topics:  # a refusal or an absent topic: nothing to delete
                    with contextlib.suppress(ClientError):
                        await admin.broker.delete_topic(addr, topic)
            return "deleted"
        for topic in topics:
            await admin.namesrv.delete_topic(topic, cluster=cluster, addr=addr)
        return "routes deleted"

    def gone(_: GroupState, state: GroupState) -> bool:
        return state.config is None and not state.topics

    def validate(states: list[GroupState]) -> None:
        if all(s.config is None for s in states if not s.on_namesrv):
            raise TargetNotFound(f"group '{group}' is not on the broker(s) named. List the "
                                 "groups with `mqadmin consumerProgress`.")

    return Mutation("deleteSubGroup", group, servers=servers, read=read, show=GroupState.show,
                    done=gone, apply=change, after="(absent)", validate=validate,
                    sequential=True, role="broker" if not cluster else "server")


# ---------------------------------------------------------------------------- offsets


@dataclass(frozen=True, slots=True)
class Offsets:
    """A group's committed offset of each queue of a topic on one broker, and where a reset
    or clone would move each."""

    current: dict[int, int] = field(default_factory=dict)  # queue id -> committed offset
    planned: dict[int, int] = field(default_factory=dict)  # queue id -> target offset
    online: bool = False

    def show(self) -> str:
        return " ".join(f"q{q}={o}" for q, o in sorted(self.current.items())) or "(no queue)"

    def show_planned(self) -> str:
        return " ".join(f"q{q}={o}" for q, o in sorted(self.planned.items())) or "(no queue)"


async def _committed(admin: MQAdmin, addr: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offset of every queue of `topic` on the broker (0 for none, as
    Apache's consume stats report it)."""
    stats = await admin.broker.topic_stats(addr, topic)
    queues = {mq.queue_id: 0 for mq in stats.offset_table}
    try:
        consume = await admin.broker.consume_stats(addr, group, topic)
    except ClientError:
        return queues
    for mq, w in consume.offset_table.items():
        if mq.topic == topic and mq.queue_id in queues:
            queues[mq.queue_id] = w.consumer_offset
    return queues


async def _online(admin: MQAdmin, addr: str, group: str) -> bool:
    try:
        return bool(await admin.broker.consumer_ids(addr, group))
    except ClientError:
        return False


def _route_masters(admin: MQAdmin, topic: str) -> Callable[[], Awaitable[list[str]]]:
    async def servers() -> list[str]:
        _, brokers = await route_brokers(admin, topic)
        return list(brokers.values())
    return servers


def reset_offset(admin: MQAdmin, group: str, topic: str, timestamp: int, *, force: bool = True,
                 cpp_clients: bool = False, action: str = "resetOffsetByTime"
                 ) -> Mutation[Offsets]:
    """Move the group's offsets of `topic` to the first message stored at or after
    `timestamp` (ms; `RESET_TO_MAX` = -1: to the end), on every broker of the topic.
    Without `force` a queue only moves back."""

    async def read(addr: str) -> Offsets:
        current = await _committed(admin, addr, group, topic)

        async def target(queue_id: int) -> int:
            if timestamp == RESET_TO_MAX:
                return await admin.broker.max_offset(addr, topic, queue_id)
            return await admin.broker.search_offset(addr, topic, queue_id, timestamp)

        found = await asyncio.gather(*(target(q) for q in current))
        planned = {q: (t if force or t < current[q] else current[q])
                   for q, t in zip(current, found, strict=True)}
        return Offsets(current, planned, await _online(admin, addr, group))

    async def change(addr: str) -> str:
        try:
            moved = await admin.broker.reset_offset(addr, topic, group, timestamp, force=force,
                                                    cpp_clients=cpp_clients)
            return (f"reset {len(moved)} queues, consumers told (a Java consumer pauses 10 s "
                    "before it moves; its offsets show the move once it commits)")
        except ConsumerNotOnlineError:
            state = await read(addr)
            for queue_id, offset in state.planned.items():
                await admin.broker.update_consumer_offset(addr, group, topic, queue_id, offset)
            return f"reset {len(state.planned)} queues (no consumer online)"

    def done(before: Offsets, after: Offsets) -> bool:
        for queue_id, target in before.planned.items():
            now = after.current.get(queue_id)
            if now is None:
                return False
            moving = timestamp == RESET_TO_MAX or after.online
            if now != target and not (moving and now >= target):
                return False
        return True

    return Mutation(action, f"{topic}@{group}", servers=_route_masters(admin, topic),
                    read=read, show=Offsets.show, done=done, apply=change,
                    after=Offsets.show_planned, role="broker")


def clone_group_offset(admin: MQAdmin, src: str, dest: str, topic: str, *,
                       offline: bool = False) -> Mutation[Offsets]:
    """Copy `src`'s committed offsets of `topic` to `dest` on every broker of the topic."""

    async def read(addr: str) -> Offsets:
        source, current = await asyncio.gather(_committed(admin, addr, src, topic),
                                               _committed(admin, addr, dest, topic))
        return Offsets(current, source, await _online(admin, addr, dest))

    async def change(addr: str) -> str:
        await admin.broker.clone_group_offset(addr, src, dest, topic=topic, offline=offline)
        return "cloned"

    def done(before: Offsets, after: Offsets) -> bool:
        return all(after.current.get(q, -1) >= o if after.online else
                   after.current.get(q) == o for q, o in before.planned.items() if o > 0)

    return Mutation("cloneGroupOffset", f"{topic}: {src} -> {dest}",
                    servers=_route_masters(admin, topic), read=read, show=Offsets.show,
                    done=done, apply=change, after=Offsets.show_planned, role="broker")

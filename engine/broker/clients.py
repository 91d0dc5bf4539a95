"""Producers and consumers known by heartbeat: groups, their connections, subscriptions.

How this works: a HEART_BEAT registers each of the client's groups with its connection.  A
consumer group whose set of connections or subscriptions changes has every member told with a
oneway NOTIFY_CONSUMER_IDS_CHANGED, so they rebalance at once.  A connection that closes, or
sends no heartbeat for channelExpiredTimeout (120 s), leaves all its groups.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from engine.protocol.body.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    MessageModel,
    SubscriptionData,
)
from engine.protocol.codes import RequestCode
from engine.protocol.command import request
from engine.remoting.connection import Connection
from engine.remoting.errors import RemotingError

log = logging.getLogger(__name__)

Clock = Callable[[], int]


@dataclass(slots=True)
class ClientChannel:
    """One client connection as a member of a group."""

    conn: Connection
    client_id: str
    language: int
    version: int
    last_update_ms: int
    #: Said by a proxy registering a client of its own: the client's protocol ("gRPC") and
    #: its address (the connection's is the proxy's).
    protocol: str | None = None
    client_addr: str | None = None


@dataclass(slots=True)
class ConsumerGroupInfo:
    group: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    channels: dict[Connection, ClientChannel] = field(default_factory=dict)
    last_update_ms: int = 0

    def client_ids(self) -> list[str]:
        return [c.client_id for c in self.channels.values()]

    def update_channel(self, channel: ClientChannel, data: ConsumerData, now: int) -> bool:
        """Record a heartbeat; True when this connection is new to the group."""
        self.consume_type = data.consume_type
        self.message_model = data.message_model
        self.consume_from_where = data.consume_from_where
        self.last_update_ms = now
        known = self.channels.get(channel.conn)
        self.channels[channel.conn] = channel
        return known is None or known.client_id != channel.client_id

    def update_subscriptions(self, subs: Iterable[SubscriptionData]) -> bool:
        """Adopt a heartbeat's subscriptions; True when a topic came or went."""
        changed = False
        wanted = {s.topic: s.with_codes() for s in subs}
        for topic, sub in wanted.items():
            old = self.subscriptions.get(topic)
            if old is None:
                changed = True
                self.subscriptions[topic] = sub
            elif sub.sub_version > old.sub_version:
                self.subscriptions[topic] = sub
        for topic in [t for t in self.subscriptions if t not in wanted]:
            del self.subscriptions[topic]
            changed = True
        return changed


class ConsumerManager:
    def __init__(self, clock: Clock, *, notify_enabled: Callable[[str], bool]) -> None:
        self.clock = clock
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self.notify_enabled = notify_enabled
        #: Called with a group name whenever its membership or subscriptions change.
        self.listeners: list[Callable[[str], None]] = []

    def register(self, data: ConsumerData, channel: ClientChannel) -> bool:
        info = self.groups.get(data.group_name)
        if info is None:
            info = self.groups[data.group_name] = ConsumerGroupInfo(data.group_name)
        now = self.clock()
        r1 = info.update_channel(channel, data, now)
        r2 = info.update_subscriptions(data.subscription_data_set)
        if r1 or r2:
            self._changed(info)
        return r1 or r2

    def unregister(self, group: str, conn: Connection) -> None:
        info = self.groups.get(group)
        if info is None or info.channels.pop(conn, None) is None:
            return
        if not info.channels:
            del self.groups[group]
            log.info("consumer group %s has no consumer left", group)
        self._changed(info)

    def _changed(self, info: ConsumerGroupInfo) -> None:
        for listener in self.listeners:
            listener(info.group)
        if info.channels and self.notify_enabled(info.group):
            notify = request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                             {"consumerGroup": info.group}, oneway=True)
            for conn in list(info.channels):
                try:
                    conn.send_oneway(notify)
                except RemotingError as exc:
                    log.info("notify %s of group %s change failed: %s", conn.remote_addr,
                             info.group, exc)

    def connection_closed(self, conn: Connection) -> None:
        for group in [g for g, info in self.groups.items() if conn in info.channels]:
            self.unregister(group, conn)

    def expire(self, timeout_ms: int) -> list[ClientChannel]:
        """Drop members silent for longer than `timeout_ms`; returns them (to be closed)."""
        deadline = self.clock() - timeout_ms
        gone: list[ClientChannel] = []
        for group, info in list(self.groups.items()):
            for conn, channel in list(info.channels.items()):
                if channel.last_update_ms < deadline:
                    gone.append(channel)
                    self.unregister(group, conn)
        return gone

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.groups.get(group)
        return info.subscriptions.get(topic) if info is not None else None

    def find_channel(self, group: str, client_id: str) -> ClientChannel | None:
        """The connection of one client of `group` (to call it back), or None if offline."""
        info = self.groups.get(group)
        if info is None:
            return None
        for channel in info.channels.values():
            if channel.client_id == client_id:
                return channel
        return None

    def subscription_count(self, group: str) -> int:
        """How many topics the online group subscribes (0 when it is offline)."""
        info = self.groups.get(group)
        return len(info.subscriptions) if info is not None else 0

    def groups_subscribing(self, topic: str) -> set[str]:
        return {g for g, info in self.groups.items() if topic in info.subscriptions}


class ProducerManager:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.groups: dict[str, dict[Connection, ClientChannel]] = {}

    def register(self, group: str, channel: ClientChannel) -> None:
        self.groups.setdefault(group, {})[channel.conn] = channel

    def unregister(self, group: str, conn: Connection) -> None:
        members = self.groups.get(group)
        if members is None:
            return
        members.pop(conn, None)
        if not members:
            del self.groups[group]

    def connection_closed(self, conn: Connection) -> None:
        for group in [g for g, members in self.groups.items() if conn in members]:
            self.unregister(group, conn)

    def expire(self, timeout_ms: int) -> list[ClientChannel]:
        deadline = self.clock() - timeout_ms
        gone: list[ClientChannel] = []
        for group, members in list(self.groups.items()):
            for conn, channel in list(members.items()):
                if channel.last_update_ms < deadline:
                    gone.append(channel)
                    self.unregister(group, conn)
        return gone

    def members(self, group: str) -> list[ClientChannel]:
        return list(self.groups.get(group, {}).values())

    def any_live(self, group: str) -> ClientChannel | None:
        """A connection of `group` to ask about a transaction (CHECK_TRANSACTION_STATE)."""
        for channel in self.groups.get(group, {}).values():
            if not channel.conn.closed:
                return channel
        return None

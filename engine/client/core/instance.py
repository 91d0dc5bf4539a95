"""`ClientInstance`: the connections, routes, heartbeats and timers a client id shares.

How this works (client-behaviour.md §1): producers and consumers register with an instance,
which owns one `RemotingClient` whose router answers what brokers send back
(`callbacks.py`), one `RouteTable`, and these Services:

    service          first    period   does
    ---------------  -------  -------  --------------------------------------------------
    fetch-namesrv    10 s     2 min    re-read the address server (only without an explicit
                                       name-server list)
    update-routes    10 ms    30 s     refresh the route of every published/subscribed topic
    heartbeat        1 s      30 s     forget offline brokers; HEART_BEAT to every broker
                                       (masters only when there is no consumer)
    persist-offsets  10 s     5 s      every consumer commits its offsets
    rebalance        20 s     20 s     every consumer rebalances; woken at once by
                                       NOTIFY_CONSUMER_IDS_CHANGED and consumer start

Beyond Java, the heartbeat Service is also woken when a route names a broker the instance
did not know, so a producer is registered (e.g. for transaction checks) as soon as it has
sent.  The instance starts with its first member and shuts down with its last.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from engine.client.core.callbacks import router
from engine.client.core.client_api import ClientAPI
from engine.client.core.client_config import ClientConfig
from engine.client.core.errors import ClientError, ClientStateError, TopicNotExistError
from engine.client.core.members import ConsumerMember, InnerProducer, ProducerMember
from engine.client.core.namesrv import NamesrvAdmin
from engine.client.core.nsaddr import fetch_namesrv_addr
from engine.client.core.routes import BrokerAddr, RouteTable
from engine.client.core.timers import Periodic
from engine.protocol.body.heartbeat import HeartbeatData, ProducerData
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.body.route import MASTER_ID, TopicRouteData
from engine.remoting.client import RemotingClient

log = logging.getLogger(__name__)

CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
DEFAULT_TOPIC = "TBW102"


class ClientInstance:
    def __init__(self, config: ClientConfig | None = None) -> None:
        self.config = config or ClientConfig()
        self.client_id = self.config.client_id()
        timeout = self.config.mq_client_api_timeout / 1000
        self.remoting = RemotingClient(router, self, connect_timeout=timeout,
                                       credentials=self.config.credentials)
        self.api = ClientAPI(self.remoting, timeout)
        self.routes = RouteTable()
        self.producers: dict[str, ProducerMember] = {}
        self.consumers: dict[str, ConsumerMember] = {}
        self.broker_versions: dict[str, int] = {}
        self.namesrv_addr: str | None = None
        self._namesrv: NamesrvAdmin | None = None
        #: set by the first consumer that resends a message (`send_back.inner_producer`)
        self.inner_producer: InnerProducer | None = None
        self._started = False
        self._lock = asyncio.Lock()
        c = self.config
        self.route_service = Periodic("update-routes", c.poll_name_server_interval / 1000,
                                      self.update_all_routes, first_delay=0.01)
        self.heartbeat_service = Periodic("heartbeat", c.heartbeat_broker_interval / 1000,
                                          self.heartbeat_round, first_delay=1.0)
        self.persist_service = Periodic("persist-offsets",
                                        c.persist_consumer_offset_interval / 1000,
                                        self.persist_all_offsets, first_delay=10.0)
        self.rebalance_service = Periodic("rebalance", c.rebalance_interval / 1000,
                                          self.rebalance_all)
        self.nsaddr_service = Periodic("fetch-namesrv", c.fetch_namesrv_interval / 1000,
                                       self._refresh_namesrv_addr, first_delay=10.0)
        self._services = [self.route_service, self.heartbeat_service, self.persist_service,
                          self.rebalance_service]

    # ------------------------------------------------------------------ lifecycle

    @property
    def started(self) -> bool:
        return self._started

    async def start(self) -> None:
        """Resolve the name servers and start the Services (once; later calls return)."""
        async with self._lock:
            if self._started:
                return
            addr = self.config.resolved_namesrv_addr()
            fetched = addr is None
            if fetched:
                addr = await fetch_namesrv_addr(self.config.address_server())
            if addr is not None:
                self._use_namesrv(addr)
            services = self._services + ([self.nsaddr_service] if fetched else [])
            for service in services:
                service.start()
            self._started = True

    async def shutdown(self) -> None:
        async with self._lock:
            if not self._started:
                return
            self._started = False
            for service in (*self._services, self.nsaddr_service):
                if service.running:
                    await service.stop()
            if self.inner_producer is not None:
                await self.inner_producer.shutdown()
                self.inner_producer = None
            if self._namesrv is not None:
                await self._namesrv.close()
            await self.remoting.close()

    async def release(self) -> None:
        """Shut down once no producer or consumer is registered any more."""
        if not self.producers and not self.consumers:
            await self.shutdown()

    def register_producer(self, member: ProducerMember) -> None:
        if member.group in self.producers:
            raise ClientStateError(f"the producer group {member.group} has been created "
                                   "before in this client instance; use another group name")
        self.producers[member.group] = member

    def register_consumer(self, member: ConsumerMember) -> None:
        if member.group in self.consumers:
            raise ClientStateError(f"the consumer group {member.group} has been created "
                                   "before in this client instance; use another group name")
        self.consumers[member.group] = member

    async def unregister(self, *, producer_group: str | None = None,
                         consumer_group: str | None = None) -> None:
        """Forget a member and tell every broker (UNREGISTER_CLIENT)."""
        if producer_group is not None:
            self.producers.pop(producer_group, None)
        if consumer_group is not None:
            self.consumers.pop(consumer_group, None)
        for _, _, addr in self.routes.addresses(masters_only=False):
            try:
                await self.api.unregister_client(addr, self.client_id,
                                                 producer_group=producer_group,
                                                 consumer_group=consumer_group)
            except ClientError as exc:
                log.info("unregister from %s: %s", addr, exc)

    # ------------------------------------------------------------------ name servers

    def _use_namesrv(self, addr: str) -> None:
        self.namesrv_addr = addr
        self._namesrv = NamesrvAdmin(addr, timeout=self.config.mq_client_api_timeout / 1000,
                                     client=self.remoting)

    async def _refresh_namesrv_addr(self) -> None:
        await self.fetch_namesrv_addr()

    async def fetch_namesrv_addr(self) -> bool:
        """Ask the address server again; True when the list changed."""
        addr = await fetch_namesrv_addr(self.config.address_server())
        if addr is None or addr == self.namesrv_addr:
            return False
        log.info("name server address changed: %s -> %s", self.namesrv_addr, addr)
        self._use_namesrv(addr)
        return True

    # ------------------------------------------------------------------ routes

    async def update_route(self, topic: str, *, default_queue_nums: int | None = None) -> bool:
        """Fetch `topic`'s route; with `default_queue_nums`, TBW102's capped to that many
        queues (a producer's first send to a topic the brokers will auto-create).

        Returns:
            True when a route was stored, False when none is known (logged).
        """
        if self._namesrv is None:
            log.warning("no name server address: cannot look up topic %s", topic)
            return False
        try:
            if default_queue_nums is None:
                route = await self._namesrv.topic_route(topic)
            else:
                route = _capped(await self._namesrv.topic_route(DEFAULT_TOPIC),
                                default_queue_nums)
        except TopicNotExistError:
            return False
        except ClientError as exc:
            log.warning("route of %s not updated: %s", topic, exc)
            return False
        known = set(self.routes.brokers)
        self.routes.put(topic, route)
        if not set(self.routes.brokers) <= known and self.heartbeat_service.running:
            self.heartbeat_service.wakeup()
        return True

    async def update_all_routes(self) -> None:
        topics: set[str] = set()
        for producer in list(self.producers.values()):
            topics.update(producer.publish_topics())
        for consumer in list(self.consumers.values()):
            topics.update(s.topic for s in consumer.subscriptions())
        for topic in sorted(topics):
            await self.update_route(topic)

    # ------------------------------------------------------------------ heartbeats

    def heartbeat_data(self) -> HeartbeatData:
        groups = {CLIENT_INNER_PRODUCER_GROUP, *self.producers}
        return HeartbeatData(
            self.client_id, frozenset(ProducerData(g) for g in groups),
            frozenset(c.consumer_data() for c in list(self.consumers.values())))

    async def heartbeat_round(self) -> None:
        dropped = self.routes.clean_offline()
        for addr in dropped:
            log.info("broker %s is offline: forgotten", addr)
        await self.heartbeat_all()

    async def heartbeat_all(self) -> None:
        """HEART_BEAT to every known broker (masters only without consumers)."""
        data = self.heartbeat_data()
        masters_only = not data.consumer_data_set
        for name, broker_id, addr in self.routes.addresses(masters_only):
            try:
                self.broker_versions[addr] = await self.api.heartbeat(addr, data)
            except ClientError as exc:
                log.info("heartbeat to %s (%s/%d) failed: %s", addr, name, broker_id, exc)

    # ------------------------------------------------------------------ consumers

    def rebalance_now(self) -> None:
        if self.rebalance_service.running:
            self.rebalance_service.wakeup()

    async def rebalance_all(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.rebalance()
            except Exception:
                log.exception("rebalance of %s failed", consumer.group)

    async def persist_all_offsets(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.persist_offsets()
            except Exception:
                log.exception("persisting offsets of %s failed", consumer.group)

    async def consumer_ids(self, topic: str, group: str) -> list[str] | None:
        """GET_CONSUMER_LIST_BY_GROUP at a random broker of the topic; None on failure."""
        addr = self.routes.any_addr_of_topic(topic)
        if addr is None:
            await self.update_route(topic)
            addr = self.routes.any_addr_of_topic(topic)
        if addr is None:
            return None
        try:
            return await self.api.consumer_ids(addr, group)
        except ClientError as exc:
            log.warning("consumer list of %s from %s: %s", group, addr, exc)
            return None

    def master_addr(self, broker_name: str) -> str | None:
        return self.routes.master_addr(broker_name)

    async def master_addr_of(self, mq: MessageQueue) -> str | None:
        """The master of `mq`'s broker; when it is not known, the topic's route is asked for
        once more first."""
        addr = self.master_addr(mq.broker_name)
        if addr is None:
            await self.update_route(mq.topic)
            addr = self.master_addr(mq.broker_name)
        return addr

    async def subscribe_addr_of(self, mq: MessageQueue,
                                broker_id: int = MASTER_ID) -> BrokerAddr | None:
        """Where to read `mq` (`RouteTable.subscribe_addr`); when its broker is not known,
        the topic's route is asked for once more first."""
        found = self.routes.subscribe_addr(mq.broker_name, broker_id)
        if found is None:
            await self.update_route(mq.topic)
            found = self.routes.subscribe_addr(mq.broker_name, broker_id)
        return found


def _capped(route: TopicRouteData, nums: int) -> TopicRouteData:
    """TBW102's route with every broker's queue counts capped at `nums`."""
    queues = [replace(q, read_queue_nums=min(nums, q.read_queue_nums),
                      write_queue_nums=min(nums, q.read_queue_nums)) for q in route.queue_datas]
    return replace(route, queue_datas=queues)

"""The proxy's side of the brokers: routes from the name servers, and remoting calls.

How this works: in both modes the proxy reaches brokers with remoting requests, as 5.3's
cluster mode does, so one code path serves both; only the transport of the shared client
differs (in local mode the broker of its own process is reached in-process, `local.py`).
Routes come from GET_ROUTEINFO_BY_TOPIC and are cached per topic for
topicRouteServiceCacheRefreshSeconds; a topic's `message.type` comes from the broker's
GET_TOPIC_CONFIG (351, `BrokerAdmin.topic_config`) and a group's consumeMessageOrderly and
retryMaxTimes from GET_SUBSCRIPTIONGROUP_CONFIG (352), cached for
topicConfigCacheRefreshSeconds; a topic without the attribute, or a 4.x broker that keeps
none, counts as NORMAL, the type 5.3 gives a topic config without it.  Sends
and ends of transactions go over the gateway's shared `RemotingClient`; what is said on a
client's behalf (heartbeats, transaction checks) goes over that client's own connections
(`sessions.py`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

from engine.client.admin.broker import BrokerAdmin
from engine.client.core.errors import (
    ClientError,
    RequestCodeNotSupportedError,
    ServerError,
    TopicNotExistError,
    raise_for,
)
from engine.client.core.namesrv import NamesrvAdmin
from engine.client.core.send_codec import send_ext
from engine.protocol.attributes import TopicMessageType
from engine.protocol.body.route import MASTER_ID, TopicRouteData
from engine.protocol.codes import RequestCode, ResponseCode, SerializeType
from engine.protocol.command import RemotingCommand, request
from engine.protocol.header.broker import RecallMessageRequestHeader
from engine.protocol.message import (
    MAX_PROPERTIES_LENGTH,
    BatchItem,
    encode_batch_body,
    properties_to_string,
)
from engine.protocol.signature import Credentials
from engine.protocol.wire import to_ext
from engine.proxy.config import ProxyConfig
from engine.proxy.messages import OutMessage
from engine.proxy.route import WriteQueue, write_queues
from engine.proxy.status import ProxyError, code_of_remoting
from engine.proxy.v2 import definition_pb2 as pb
from engine.remoting.client import RemotingClient
from engine.remoting.errors import RemotingError

log = logging.getLogger("engine.proxy")

#: 5.3 SubscriptionGroupConfig default retryMaxTimes.
DEFAULT_RETRY_MAX_TIMES = 16


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """What a consumer group's config tells its 5.x clients."""

    fifo: bool = False
    retry_max_times: int = DEFAULT_RETRY_MAX_TIMES


@dataclass(frozen=True, slots=True)
class Sent:
    """A stored message: where, and the ids the broker answered."""

    broker_name: str
    broker_addr: str
    queue_id: int
    queue_offset: int
    offset_msg_id: str
    transaction_id: str | None
    status: int  # the remoting code: SUCCESS, FLUSH_DISK_TIMEOUT, ...
    recall_handle: str = ""  # a parked timer message's (5.3)


#: What 5.3.3's broker answers a message whose properties are too long (the proxy says the
#: same of a batch it cannot encode for that reason).
PROPERTIES_TOO_LONG = ("the message is illegal, maybe msg body or properties length not "
                       "matched. msg body length limit {max}B, msg properties length limit 32KB.")


def broker_failure(exc: Exception, what: str) -> ProxyError:
    """A remoting failure as the `ProxyError` 5.3 answers it with."""
    if isinstance(exc, TopicNotExistError):
        return ProxyError(pb.TOPIC_NOT_FOUND, str(exc))
    if isinstance(exc, ServerError):
        return ProxyError(code_of_remoting(exc.code), exc.remark or f"{what} failed")
    if isinstance(exc, (RemotingError, TimeoutError)):
        return ProxyError(pb.PROXY_TIMEOUT, f"{what}: {exc}")
    return ProxyError(pb.INTERNAL_SERVER_ERROR, f"{what}: {exc}")


class BrokerGateway:
    """Routes, topic types and the calls the proxy makes to brokers for its clients."""

    def __init__(self, config: ProxyConfig, namesrv_addr: str, *,
                 credentials: Credentials | None = None) -> None:
        self.config = config
        self.credentials = credentials
        self.timeout = float(config.grpc_proxy_relay_request_timeout_in_seconds)
        self.remoting = RemotingClient(connect_timeout=3.0, credentials=credentials)
        self.admin = BrokerAdmin(self.remoting, self.timeout)
        self._ns_client = RemotingClient(connect_timeout=3.0, credentials=credentials)
        self.namesrv = NamesrvAdmin(namesrv_addr, timeout=3.0, client=self._ns_client)
        self._routes: dict[str, tuple[float, TopicRouteData]] = {}
        self._writable: dict[int, list[WriteQueue]] = {}  # id(route) -> its write queues
        self._types: dict[str, tuple[float, TopicMessageType]] = {}
        self._groups: dict[str, tuple[float, GroupSettings]] = {}

    async def close(self) -> None:
        await self.namesrv.close()
        await self._ns_client.close()
        await self.remoting.close()

    # ------------------------------------------------------------------ routes

    async def route(self, topic: str) -> TopicRouteData:
        """The topic's route, cached for topicRouteServiceCacheRefreshSeconds.

        Raises:
            ProxyError: TOPIC_NOT_FOUND, or the name servers cannot be reached.
        """
        now = time.monotonic()
        cached = self._routes.get(topic)
        if cached is not None and now - cached[0] < self.config.topic_route_service_cache_refresh_seconds:  # noqa: E501
            return cached[1]
        try:
            route = await self.namesrv.topic_route(topic)
        except ClientError as exc:
            if cached is not None and not isinstance(exc, TopicNotExistError):
                return cached[1]  # name servers unreachable: the last route stands
            raise broker_failure(exc, f"route of topic {topic}") from None
        self._routes[topic] = (now, route)
        if cached is not None:
            self._writable.pop(id(cached[1]), None)
        return route

    async def write_queues(self, topic: str) -> list[WriteQueue]:
        """The topic's writable queues (computed once per route fetched)."""
        route = await self.route(topic)
        queues = self._writable.get(id(route))
        if queues is None:
            queues = self._writable[id(route)] = write_queues(route)
        return queues

    def cached_write_queues(self, topic: str) -> list[WriteQueue] | None:
        """`write_queues` without a call when the route is cached and fresh (else None)."""
        cached = self._routes.get(topic)
        if cached is None or time.monotonic() - cached[0] >= \
                self.config.topic_route_service_cache_refresh_seconds:
            return None
        return self._writable.get(id(cached[1]))

    def cached_message_type(self, topic: str) -> TopicMessageType | None:
        """`topic_message_type` without a call when it is cached and fresh (else None)."""
        cached = self._types.get(topic)
        if cached is None or time.monotonic() - cached[0] >= \
                self.config.topic_config_cache_refresh_seconds:
            return None
        return cached[1]

    def forget_route(self, topic: str) -> None:
        cached = self._routes.pop(topic, None)
        if cached is not None:
            self._writable.pop(id(cached[1]), None)

    @staticmethod
    def master_addr(route: TopicRouteData, broker_name: str) -> str | None:
        for data in route.broker_datas:
            if data.broker_name == broker_name:
                return data.broker_addrs.get(MASTER_ID)
        return None

    async def masters(self, topics: list[str]) -> dict[str, str]:
        """Broker name -> master address of every broker serving one of `topics`."""
        out: dict[str, str] = {}
        for topic in topics:
            try:
                route = await self.route(topic)
            except ProxyError:
                continue
            for data in route.broker_datas:
                addr = data.broker_addrs.get(MASTER_ID)
                if addr:
                    out[data.broker_name] = addr
        return out

    # ------------------------------------------------------------------ topic types

    async def topic_message_type(self, topic: str) -> TopicMessageType:
        """The topic's `message.type` (GET_TOPIC_CONFIG 351 on a master of its route), cached
        for topicConfigCacheRefreshSeconds: NORMAL when the topic has no attribute or the
        broker keeps none (4.x), UNSPECIFIED when no broker answers with a config (5.3)."""
        now = time.monotonic()
        cached = self._types.get(topic)
        if cached is not None and now - cached[0] < self.config.topic_config_cache_refresh_seconds:
            return cached[1]
        try:
            datas = (await self.route(topic)).broker_datas
        except ProxyError as exc:
            if exc.code != pb.TOPIC_NOT_FOUND:
                raise
            datas = []  # 5.3.3: no config, so UNSPECIFIED (and the send refused for its type)
        kind = TopicMessageType.UNSPECIFIED
        for data in datas:
            addr = data.broker_addrs.get(MASTER_ID)
            if not addr:
                continue
            try:
                kind = (await self.admin.topic_config(addr, topic)).message_type
                break
            except RequestCodeNotSupportedError:
                kind = TopicMessageType.NORMAL  # a 4.x broker: no attributes at all
                break
            except (ClientError, ValueError):  # unreachable, no config, or a bad stored value
                continue
        self._types[topic] = (now, kind)
        return kind

    async def group_settings(self, group: str, topics: list[str]) -> GroupSettings:
        """A group's consumeMessageOrderly and retryMaxTimes from GET_SUBSCRIPTIONGROUP_CONFIG
        (352) on a broker of its topics; 5.3's defaults where brokers do not answer it."""
        now = time.monotonic()
        cached = self._groups.get(group)
        if cached is not None and now - cached[0] < self.config.topic_config_cache_refresh_seconds:
            return cached[1]
        found = GroupSettings()
        for addr in (await self.masters(topics)).values():
            try:
                config = await self.admin.group_config(addr, group)
            except ClientError:
                continue
            found = GroupSettings(fifo=config.orderly, retry_max_times=config.retry_max_times)
            break
        self._groups[group] = (now, found)
        return found

    # ------------------------------------------------------------------ send / transactions

    async def send(self, queue: WriteQueue, msgs: list[OutMessage], *,
                   binary: bool = False) -> list[Sent]:
        """SEND_MESSAGE_V2 of one message, or SEND_BATCH_MESSAGE of several (5.3 sends a
        request's messages as one batch), to one queue; one `Sent` per message.  `binary`:
        the header in RocketMQ's binary encoding (SerializeType.ROCKETMQ), cheaper to write and
        read than JSON on both sides, and answered in it.

        Raises:
            ProxyError: the broker refused them or could not be reached.
        """
        first = msgs[0]
        batch = len(msgs) > 1
        if batch:
            if any(len(properties_to_string(m.properties).encode()) > MAX_PROPERTIES_LENGTH
                   for m in msgs):  # the batch cannot be encoded (5.3.3 fails it the same)
                raise ProxyError(pb.INTERNAL_SERVER_ERROR, PROPERTIES_TOO_LONG.format(
                    max=self.config.max_message_size))
            body = encode_batch_body(BatchItem(0, m.body, properties_to_string(m.properties))
                                     for m in msgs)
            props = "WAIT\x01true"
            code = RequestCode.SEND_BATCH_MESSAGE
        else:
            body, props = first.body, properties_to_string(first.properties)
            code = RequestCode.SEND_MESSAGE_V2
        ext = send_ext(group=first.topic, topic=first.topic, queue_id=queue.queue_id,
                       sys_flag=first.sys_flag, born_ms=int(time.time() * 1000), flag=0,
                       properties=props, default_queue_nums=queue.queue_nums,
                       broker_name=queue.broker_name, batch=batch)
        addr = queue.broker_addr
        try:
            cmd = request(code, ext, body,
                          serialize_type=SerializeType.ROCKETMQ if binary else SerializeType.JSON)
            resp = await self.remoting.invoke(addr, cmd, self.timeout)
        except RemotingError as exc:
            raise broker_failure(exc, f"send to {queue.broker_name}") from None
        if resp.code not in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT,
                             ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE):
            try:
                raise_for(resp, addr)
            except ClientError as exc:
                raise broker_failure(exc, f"send to {queue.broker_name}") from None
            raise ProxyError(pb.INTERNAL_SERVER_ERROR, f"send answered code {resp.code}")
        ext_in = resp.ext_fields or {}
        try:
            queue_id, offset = int(ext_in["queueId"]), int(ext_in["queueOffset"])
            ids = ext_in["msgId"].split(",")
        except (KeyError, ValueError) as exc:
            raise ProxyError(pb.INTERNAL_SERVER_ERROR,
                             f"send answer lacks its header: {exc}") from None
        if len(ids) != len(msgs):
            ids = [ids[0]] * len(msgs)
        transaction_id = ext_in.get("transactionId")
        recall = ext_in.get("recallHandle") or ""
        return [Sent(queue.broker_name, addr, queue_id, offset + i, ids[i], transaction_id,
                     resp.code, recall) for i in range(len(msgs))]

    async def recall(self, topic: str, broker_name: str, handle: str, language: int) -> str:
        """RECALL_MESSAGE to the master of `broker_name`; the recalled message's id.

        Raises:
            ProxyError: INTERNAL_SERVER_ERROR with the broker's remark for any refusal (as
                5.3.3's proxy answers it), or the broker could not be reached.
        """
        addr = (await self.masters([topic])).get(broker_name)
        if addr is None:  # 5.3.3's local mode asks its broker, which answers this
            raise ProxyError(pb.INTERNAL_SERVER_ERROR,
                             "recall failed, broker service not available")
        header = RecallMessageRequestHeader(topic=topic, recall_handle=handle,
                                            bname=broker_name)
        cmd = dataclasses.replace(request(RequestCode.RECALL_MESSAGE, to_ext(header)),
                                  language=language)
        try:
            resp = await self.remoting.invoke(addr, cmd, self.timeout)
        except RemotingError as exc:
            raise broker_failure(exc, f"recall on {broker_name}") from None
        if resp.code != ResponseCode.SUCCESS:
            raise ProxyError(pb.INTERNAL_SERVER_ERROR, resp.remark or "recall failed")
        return (resp.ext_fields or {}).get("msgId", "")

    async def oneway(self, addr: str, cmd: RemotingCommand, what: str) -> None:
        try:
            await self.remoting.invoke_oneway(addr, cmd)
        except RemotingError as exc:
            raise broker_failure(exc, what) from None

    async def call_many(self, addr: str, cmds: list[RemotingCommand], what: str
                        ) -> list[RemotingCommand | ProxyError]:
        """Requests sent at once (so the broker reads them together): the answer to each,
        or the ProxyError of one that got none.

        Raises:
            ProxyError: the broker could not be reached at all.
        """
        try:
            answers = await self.remoting.invoke_many(addr, cmds, self.timeout)
        except RemotingError as exc:
            raise broker_failure(exc, what) from None
        return [broker_failure(a, what) if isinstance(a, RemotingError) else a
                for a in answers]

    async def call(self, addr: str, cmd: RemotingCommand, what: str,
                   timeout: float | None = None) -> RemotingCommand:
        """One request answered SUCCESS (or another code the caller reads itself).

        Raises:
            ProxyError: the broker could not be reached.
        """
        try:
            return await self.remoting.invoke(addr, cmd, timeout or self.timeout)
        except RemotingError as exc:
            raise broker_failure(exc, what) from None

"""`NamesrvAdmin`: typed async calls for every admin request a name server answers.

How this works: a `NamesrvAdmin` holds the name-server address list and one
`RemotingClient`.  A call without `addr` goes to the server that answered last and moves on
to the next address when one is unreachable (refused, timed out, closed), the way Apache's
client rotates through its list; the `UnreachableError` raised when none answers names every
address and why it failed.  A call with `addr` talks to that server only: name servers do
not replicate each other, so KV items, settings and write permissions are changed on each
server in turn (`on_each`), as Apache's mqadmin does.  Every call has `timeout` seconds for
connecting and the same again for the answer.  Bodies are read with `fastjson.loads`, so the
non-standard JSON of Java servers (unquoted integer keys) parses as well as standard JSON.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from engine.client.core.errors import (
    BadResponseError,
    ClientError,
    InvalidAddressError,
    UnreachableError,
    raise_for,
)
from engine.common import properties
from engine.protocol import fastjson
from engine.protocol.body.route import ClusterInfo, KVTable, TopicList, TopicRouteData
from engine.protocol.codes import RequestCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.errors import ProtocolError
from engine.protocol.header.namesrv import (
    AddWritePermOfBrokerResponseHeader,
    BrokerNameRequestHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from engine.protocol.wire import from_ext, from_json, to_ext
from engine.remoting.address import parse_addr_list
from engine.remoting.client import RemotingClient
from engine.remoting.errors import RemotingError

T = TypeVar("T")

DEFAULT_TIMEOUT = 3.0


@dataclasses.dataclass(frozen=True, slots=True)
class ServerOutcome(Generic[T]):
    """What one name server did with a call made on each of them: a value or an error."""

    addr: str
    value: T | None = None
    error: ClientError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def parse_route(body: bytes | None, addr: str | None = None) -> TopicRouteData:
    """A GET_ROUTEINFO_BY_TOPIC body, in standard or fastjson form.

    Raises:
        BadResponseError: no body (Apache's client refuses that too) or not a route.
    """
    if not body:
        raise BadResponseError("route answer without a body", addr)
    return _decode(TopicRouteData, body, addr)


def parse_cluster_info(body: bytes | None, addr: str | None = None) -> ClusterInfo:
    """A GET_BROKER_CLUSTER_INFO body (always fastjson's form: unquoted broker ids)."""
    if not body:
        return ClusterInfo()
    return _decode(ClusterInfo, body, addr)


def _decode(cls: type[T], body: bytes, addr: str | None) -> T:
    try:
        return from_json(cls, fastjson.loads(body))
    except ProtocolError as exc:
        raise BadResponseError(f"{cls.__name__} body does not decode: {exc}", addr) from None


def _header(cls: type[T], cmd: RemotingCommand, addr: str) -> T:
    try:
        return from_ext(cls, cmd.ext_fields)
    except ProtocolError as exc:
        raise BadResponseError(f"response header does not decode: {exc}", addr) from None


class NamesrvAdmin:
    """Admin calls to a list of name servers (see the module docstring for fail-over)."""

    def __init__(
        self,
        addrs: str | Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        client: RemotingClient | None = None,
    ) -> None:
        """
        Args:
            addrs: ``host:port`` addresses, or one ``;``-separated string (NAMESRV_ADDR).
            timeout: seconds to connect and again seconds to wait for each answer.
            client: a client to share; by default the admin opens (and closes) its own.

        Raises:
            InvalidAddressError: an address is not ``host:port``, or there is none.
        """
        text = addrs if isinstance(addrs, str) else ";".join(addrs)
        try:
            self.addrs = parse_addr_list(text)
        except ValueError as exc:
            raise InvalidAddressError(str(exc)) from None
        if not self.addrs:
            raise InvalidAddressError("no name server address given")
        self.timeout = timeout
        self._own_client = client is None
        self._client = client if client is not None else RemotingClient(connect_timeout=timeout)
        self._current = 0
        #: Called with (address, error) when a call moves on from an unreachable server.
        self.on_failover: Callable[[str, RemotingError], None] | None = None

    async def __aenter__(self) -> NamesrvAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._own_client:
            await self._client.close()

    # ------------------------------------------------------------------------ plumbing

    async def _call(self, code: int, ext: dict[str, str] | None = None,
                    body: bytes | None = None, *, addr: str | None = None
                    ) -> tuple[str, RemotingCommand]:
        """Send one request; returns the answering address and its SUCCESS response.

        Raises:
            UnreachableError: no server (or not `addr`) answered.
            ServerError: the answering server refused the request.
        """
        cmd = request(code, ext, body)
        if addr is not None:
            order = [addr]
        else:
            n = len(self.addrs)
            order = [self.addrs[(self._current + i) % n] for i in range(n)]
        failures: list[tuple[str, RemotingError]] = []
        for i, target in enumerate(order):
            try:
                response = await self._client.invoke(target, cmd, self.timeout)
            except RemotingError as exc:
                failures.append((target, exc))
                if i + 1 < len(order) and self.on_failover is not None:
                    self.on_failover(target, exc)
                continue
            if addr is None:
                self._current = self.addrs.index(target)
            return target, raise_for(response, target)
        raise UnreachableError(failures)

    async def on_each(self, call: Callable[[str], Awaitable[T]]) -> list[ServerOutcome[T]]:
        """Run `call(addr)` against every name server at once; one outcome per address,
        in list order.  Only `ClientError`s are caught; anything else propagates."""

        async def one(target: str) -> ServerOutcome[T]:
            try:
                return ServerOutcome(target, await call(target))
            except ClientError as exc:
                return ServerOutcome(target, error=exc)

        return list(await asyncio.gather(*(one(a) for a in self.addrs)))

    async def _topic_list(self, code: int, ext: dict[str, str] | None = None,
                          addr: str | None = None) -> TopicList:
        at, resp = await self._call(code, ext, addr=addr)
        return _decode(TopicList, resp.body, at) if resp.body else TopicList()

    # ------------------------------------------------------------------------ routes

    async def cluster_info(self, *, addr: str | None = None) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO (106): brokers by name and broker names by cluster."""
        at, resp = await self._call(RequestCode.GET_BROKER_CLUSTER_INFO, addr=addr)
        return parse_cluster_info(resp.body, at)

    async def topic_route(self, topic: str, *, addr: str | None = None) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC (105), asking for standard JSON but reading either form.

        Raises:
            TopicNotExistError: no broker serves the topic.
        """
        header = GetRouteInfoRequestHeader(topic, accept_standard_json_only=True)
        at, resp = await self._call(RequestCode.GET_ROUTEINFO_BY_TOPIC, to_ext(header),
                                    addr=addr)
        return parse_route(resp.body, at)

    async def all_topics(self, *, addr: str | None = None) -> TopicList:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206)."""
        return await self._topic_list(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, addr=addr)

    async def topics_by_cluster(self, cluster: str, *, addr: str | None = None) -> TopicList:
        """GET_TOPICS_BY_CLUSTER (224): topics with a queue on a broker of `cluster`."""
        ext = to_ext(GetTopicsByClusterRequestHeader(cluster))
        return await self._topic_list(RequestCode.GET_TOPICS_BY_CLUSTER, ext, addr)

    async def system_topics(self, *, addr: str | None = None) -> TopicList:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS (304): cluster and broker names, plus one broker
        address in `broker_addr`."""
        return await self._topic_list(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, addr=addr)

    async def unit_topics(self, *, addr: str | None = None) -> TopicList:
        """GET_UNIT_TOPIC_LIST (311)."""
        return await self._topic_list(RequestCode.GET_UNIT_TOPIC_LIST, addr=addr)

    async def has_unit_sub_topics(self, *, addr: str | None = None) -> TopicList:
        """GET_HAS_UNIT_SUB_TOPIC_LIST (312)."""
        return await self._topic_list(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST, addr=addr)

    async def has_unit_sub_ununit_topics(self, *, addr: str | None = None) -> TopicList:
        """GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (313)."""
        return await self._topic_list(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
                                      addr=addr)

    async def delete_topic(self, topic: str, *, cluster: str | None = None,
                           addr: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV (216): forget the topic's route (on one cluster only when
        `cluster` is given; 4.9.7 reads it, older servers ignore it)."""
        header = DeleteTopicFromNamesrvRequestHeader(topic, cluster)
        await self._call(RequestCode.DELETE_TOPIC_IN_NAMESRV, to_ext(header), addr=addr)

    async def wipe_write_perm(self, broker_name: str, *, addr: str | None = None) -> int:
        """WIPE_WRITE_PERM_OF_BROKER (205); returns how many topics lost write permission."""
        at, resp = await self._call(RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                                    to_ext(BrokerNameRequestHeader(broker_name)), addr=addr)
        return _header(WipeWritePermOfBrokerResponseHeader, resp, at).wipe_topic_count

    async def add_write_perm(self, broker_name: str, *, addr: str | None = None) -> int:
        """ADD_WRITE_PERM_OF_BROKER (327); returns how many topics got write permission."""
        at, resp = await self._call(RequestCode.ADD_WRITE_PERM_OF_BROKER,
                                    to_ext(BrokerNameRequestHeader(broker_name)), addr=addr)
        return _header(AddWritePermOfBrokerResponseHeader, resp, at).add_topic_count

    # ------------------------------------------------------------------------ KV config

    async def put_kv_config(self, namespace: str, key: str, value: str, *,
                            addr: str | None = None) -> None:
        """PUT_KV_CONFIG (100)."""
        header = PutKVConfigRequestHeader(namespace, key, value)
        await self._call(RequestCode.PUT_KV_CONFIG, to_ext(header), addr=addr)

    async def get_kv_config(self, namespace: str, key: str, *,
                            addr: str | None = None) -> str:
        """GET_KV_CONFIG (101).

        Raises:
            QueryNotFoundError: no such item.
        """
        header = GetKVConfigRequestHeader(namespace, key)
        at, resp = await self._call(RequestCode.GET_KV_CONFIG, to_ext(header), addr=addr)
        value = _header(GetKVConfigResponseHeader, resp, at).value
        return "" if value is None else value

    async def delete_kv_config(self, namespace: str, key: str, *,
                               addr: str | None = None) -> None:
        """DELETE_KV_CONFIG (102); deleting an absent item succeeds."""
        header = DeleteKVConfigRequestHeader(namespace, key)
        await self._call(RequestCode.DELETE_KV_CONFIG, to_ext(header), addr=addr)

    async def get_kv_list(self, namespace: str, *, addr: str | None = None) -> dict[str, str]:
        """GET_KVLIST_BY_NAMESPACE (219).

        Raises:
            QueryNotFoundError: the namespace holds no item.
        """
        header = GetKVListByNamespaceRequestHeader(namespace)
        at, resp = await self._call(RequestCode.GET_KVLIST_BY_NAMESPACE, to_ext(header),
                                    addr=addr)
        return dict(_decode(KVTable, resp.body, at).table) if resp.body else {}

    # ------------------------------------------------------------------------ settings

    async def get_config(self, *, addr: str | None = None) -> dict[str, str]:
        """GET_NAMESRV_CONFIG (319): every setting, in the server's order."""
        at, resp = await self._call(RequestCode.GET_NAMESRV_CONFIG, addr=addr)
        if not resp.body:
            return {}
        try:
            return properties.loads(resp.body.decode("utf-8"))
        except (UnicodeDecodeError, properties.PropertiesError) as exc:
            raise BadResponseError(f"config body is not properties text: {exc}", at) from None

    async def update_config(self, settings: Mapping[str, Any], *,
                            addr: str | None = None) -> None:
        """UPDATE_NAMESRV_CONFIG (318): values are sent as their `str`.

        Raises:
            NoPermissionError: a protected key (kvConfigPath, configStorePath, ...).
        """
        text = properties.dumps((k, _setting_text(v)) for k, v in settings.items())
        await self._call(RequestCode.UPDATE_NAMESRV_CONFIG, body=text.encode("utf-8"),
                         addr=addr)


def _setting_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)

"""Custom headers of the name server's requests and responses."""

from __future__ import annotations

from dataclasses import dataclass

from engine.protocol.wire import wire_name


@dataclass(frozen=True, slots=True)
class RegisterBrokerRequestHeader:
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    compressed: bool = False
    body_crc32: int = wire_name("bodyCrc32", 0)


@dataclass(frozen=True, slots=True)
class RegisterBrokerResponseHeader:
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(frozen=True, slots=True)
class UnRegisterBrokerRequestHeader:
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


QueryDataVersionRequestHeader = UnRegisterBrokerRequestHeader


@dataclass(frozen=True, slots=True)
class QueryDataVersionResponseHeader:
    changed: bool | None = None


@dataclass(frozen=True, slots=True)
class GetRouteInfoRequestHeader:
    topic: str
    accept_standard_json_only: bool | None = None


@dataclass(frozen=True, slots=True)
class PutKVConfigRequestHeader:
    namespace: str
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class GetKVConfigRequestHeader:
    namespace: str
    key: str


DeleteKVConfigRequestHeader = GetKVConfigRequestHeader


@dataclass(frozen=True, slots=True)
class GetKVConfigResponseHeader:
    value: str | None = None


@dataclass(frozen=True, slots=True)
class GetKVListByNamespaceRequestHeader:
    namespace: str


@dataclass(frozen=True, slots=True)
class DeleteTopicFromNamesrvRequestHeader:
    topic: str
    cluster_name: str | None = None


@dataclass(frozen=True, slots=True)
class BrokerNameRequestHeader:
    """WIPE_WRITE_PERM_OF_BROKER and ADD_WRITE_PERM_OF_BROKER."""

    broker_name: str


@dataclass(frozen=True, slots=True)
class WipeWritePermOfBrokerResponseHeader:
    wipe_topic_count: int = 0


@dataclass(frozen=True, slots=True)
class AddWritePermOfBrokerResponseHeader:
    add_topic_count: int = 0


@dataclass(frozen=True, slots=True)
class GetTopicsByClusterRequestHeader:
    cluster: str

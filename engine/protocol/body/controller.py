"""JSON bodies of the 5.3 controller's requests and answers, with 5.3.3's field names.

| body | carried by |
|---|---|
| `SyncStateSet` | ALTER_SYNC_STATE_SET both ways; REGISTER_BROKER, GET_REPLICA_INFO answers |
| `ElectMasterResponseBody` | ELECT_MASTER answer (the member group and the new SyncStateSet) |
| `BrokerReplicasInfo` | GET_SYNC_STATE_DATA answer (the request: a JSON list of broker names) |
| `EpochEntryCache` | GET_BROKER_EPOCH_CACHE answer (a broker's epoch history) |
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from engine.protocol import fastjson
from engine.protocol.body.decode import decode_body
from engine.protocol.errors import BodyError
from engine.protocol.wire import Int32, to_json

BrokerId = int
BrokerName = str

#: `EpochEntry.endOffset` of the current epoch: Java's Long.MAX_VALUE.
OPEN_END_OFFSET = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class SyncStateSet:
    sync_state_set: frozenset[BrokerId] = frozenset()
    sync_state_set_epoch: Int32 = 0

    def encode(self) -> bytes:
        return fastjson.dumpb(to_json(self))

    @classmethod
    def decode(cls, data: bytes | None, name: str, role: str = "request") -> SyncStateSet:
        """Raises:
        BodyError: not a SyncStateSet; the text names the request `name`."""
        return decode_body(cls, data, name, role)


@dataclass(frozen=True, slots=True)
class BrokerMemberGroup:
    cluster: str | None = None
    broker_name: str | None = None
    broker_addrs: dict[BrokerId, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ElectMasterResponseBody:
    broker_member_group: BrokerMemberGroup | None = None
    sync_state_set: frozenset[BrokerId] = frozenset()

    def encode(self) -> bytes:
        return fastjson.dumpb(to_json(self))


@dataclass(frozen=True, slots=True)
class ReplicaIdentity:
    broker_name: str | None = None
    broker_id: BrokerId | None = None
    broker_address: str | None = None
    alive: bool | None = None


@dataclass(frozen=True, slots=True)
class ReplicasInfo:
    master_broker_id: BrokerId | None = None
    master_address: str | None = None
    master_epoch: Int32 = 0
    sync_state_set_epoch: Int32 = 0
    in_sync_replicas: list[ReplicaIdentity] = field(default_factory=list)
    not_in_sync_replicas: list[ReplicaIdentity] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class BrokerReplicasInfo:
    replicas_info_table: dict[BrokerName, ReplicasInfo] = field(default_factory=dict)

    def encode(self) -> bytes:
        return fastjson.dumpb(to_json(self))


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: Int32
    start_offset: int
    end_offset: int = OPEN_END_OFFSET


@dataclass(frozen=True, slots=True)
class EpochEntryCache:
    cluster_name: str | None = None
    broker_name: str | None = None
    broker_id: BrokerId = 0
    epoch_list: list[EpochEntry] = field(default_factory=list)
    max_offset: int = 0

    def encode(self) -> bytes:
        return fastjson.dumpb(to_json(self))


def encode_broker_names(names: list[BrokerName]) -> bytes:
    """GET_SYNC_STATE_DATA's request body."""
    return orjson.dumps(names)


def decode_broker_names(data: bytes | None) -> list[BrokerName]:
    """GET_SYNC_STATE_DATA's request body; Apache answers an empty table to an empty one.

    Raises:
        BodyError: not a JSON list of strings.
    """
    if not data:
        return []
    try:
        value = fastjson.loads(data)
    except BodyError as exc:
        raise BodyError(f"CONTROLLER_GET_SYNC_STATE_DATA: the body is not JSON ({exc})") from None
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BodyError("CONTROLLER_GET_SYNC_STATE_DATA: the body must be a JSON list of "
                        "broker names")
    return value

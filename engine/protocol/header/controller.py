"""Custom headers of the 5.3 controller's requests and answers (codes 904, 1001-1013).

Field names and Java types as `org.apache.rocketmq.remoting.protocol.header.controller`
(and `header.namesrv.BrokerHeartbeatRequestHeader`) at 5.3.3: a Java `Long` is an `int`, an
`Integer` an `Int32`; a boxed field Java may leave null is `X | None` here.  `invokeTime`
is the caller's clock in milliseconds (Java fills it with `currentTimeMillis()`; these
dataclasses take it from the caller and default to 0 so they stay pure values).

NOTIFY_BROKER_ROLE_CHANGED (1008) keeps its header in `header/ha.py`, shared with the
name-server-driven switchover.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.protocol.wire import Int32

#: `MixAll.FIRST_BROKER_CONTROLLER_ID`: the id the first broker of a set applies for.
FIRST_BROKER_CONTROLLER_ID = 1


@dataclass(frozen=True, slots=True)
class AlterSyncStateSetRequestHeader:
    """CONTROLLER_ALTER_SYNC_STATE_SET; the body is the proposed `SyncStateSet`."""

    broker_name: str
    master_broker_id: int
    master_epoch: Int32
    invoke_time: int = 0


@dataclass(frozen=True, slots=True)
class AlterSyncStateSetResponseHeader:
    new_sync_state_set_epoch: Int32 = 0


@dataclass(frozen=True, slots=True)
class ElectMasterRequestHeader:
    """CONTROLLER_ELECT_MASTER: `brokerId` -1 lets the policy choose; `designateElect`
    true makes `brokerId` the only acceptable choice (mqadmin electMaster)."""

    cluster_name: str = ""
    broker_name: str = ""
    broker_id: int = -1
    designate_elect: bool = False
    invoke_time: int = 0


@dataclass(frozen=True, slots=True)
class ElectMasterResponseHeader:
    """Also the header of REGISTER_BROKER's answer, less cluster and broker names."""

    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: Int32 | None = None
    sync_state_set_epoch: Int32 | None = None


@dataclass(frozen=True, slots=True)
class GetReplicaInfoRequestHeader:
    broker_name: str


@dataclass(frozen=True, slots=True)
class GetReplicaInfoResponseHeader:
    """The body is the set's `SyncStateSet`."""

    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: Int32 | None = None


@dataclass(frozen=True, slots=True)
class GetMetaDataResponseHeader:
    """CONTROLLER_GET_METADATA_INFO: `peers` is `id:address;` per controller, `;`-ended."""

    group: str | None = None
    controller_leader_id: str | None = None
    controller_leader_address: str | None = None
    is_leader: bool = False
    peers: str | None = None


@dataclass(frozen=True, slots=True)
class CleanControllerBrokerDataRequestHeader:
    """CLEAN_BROKER_DATA: `brokerControllerIdsToClean` is ids joined by `;` (none: all)."""

    broker_name: str
    cluster_name: str | None = None
    broker_controller_ids_to_clean: str | None = None
    is_clean_living_broker: bool = False
    invoke_time: int = 0


@dataclass(frozen=True, slots=True)
class GetNextBrokerIdRequestHeader:
    cluster_name: str
    broker_name: str


@dataclass(frozen=True, slots=True)
class GetNextBrokerIdResponseHeader:
    cluster_name: str | None = None
    broker_name: str | None = None
    next_broker_id: int | None = None


@dataclass(frozen=True, slots=True)
class ApplyBrokerIdRequestHeader:
    """CONTROLLER_APPLY_BROKER_ID: `registerCheckCode` is `address;timestampMillis`."""

    cluster_name: str
    broker_name: str
    applied_broker_id: int
    register_check_code: str


@dataclass(frozen=True, slots=True)
class ApplyBrokerIdResponseHeader:
    cluster_name: str | None = None
    broker_name: str | None = None


@dataclass(frozen=True, slots=True)
class RegisterBrokerToControllerRequestHeader:
    """CONTROLLER_REGISTER_BROKER: a broker with an applied id says where it listens."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    invoke_time: int = 0


@dataclass(frozen=True, slots=True)
class RegisterBrokerToControllerResponseHeader:
    """The master fields are absent while the set has no live master; the body is the
    set's `SyncStateSet`."""

    cluster_name: str | None = None
    broker_name: str | None = None
    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: Int32 | None = None
    sync_state_set_epoch: Int32 | None = None


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequestHeader:
    """BROKER_HEARTBEAT (904): liveness plus what the election policy ranks by."""

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int | None = None
    epoch: Int32 | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    heartbeat_timeout_mills: int | None = None
    election_priority: Int32 | None = None

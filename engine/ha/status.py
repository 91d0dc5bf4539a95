"""HA status values: the GET_BROKER_HA_STATUS (907) body, shaped like 5.x `HARuntimeInfo`.

5.x fields keep their names (`master`, `masterCommitLogMaxOffset`, `inSyncSlaveNums`,
`haConnectionInfo[{addr, slaveAckOffset, diff, inSync, transferredByteInSecond,
transferFromWhere}]`, `haClientRuntimeInfo{masterAddr, transferredByteInSecond, maxOffset,
lastReadTimestamp, lastWriteTimestamp, masterFlushOffset, isActivated}`); the fields after
them are this engine's additions, which 5.x tools ignore.  Estimates of messages divide
bytes by the store's average record size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.protocol import fastjson
from engine.protocol.wire import from_json, to_json

if TYPE_CHECKING:  # a type only: mqadmin reads this module without loading the store
    from engine.store.message_store import MessageStore


@dataclass(frozen=True, slots=True)
class HAConnectionInfo:
    """One slave as its master sees it."""

    addr: str = ""
    slave_ack_offset: int = 0
    diff: int = 0  # master max offset - slave ack offset (bytes behind)
    in_sync: bool = False
    transferred_byte_in_second: int = 0
    transfer_from_where: int = 0
    # ---- this engine
    estimated_messages_behind: int = 0
    estimated_seconds_behind: float = 0.0
    connection_age_ms: int = 0
    last_ack_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class HAClientRuntimeInfo:
    """A slave's view of its master."""

    master_addr: str | None = None  # the master's HA address
    transferred_byte_in_second: int = 0
    max_offset: int = 0  # this slave's commit-log max offset
    last_read_timestamp: int = 0
    last_write_timestamp: int = 0
    master_flush_offset: int = 0
    is_activated: bool = False  # connected to the master
    # ---- this engine
    master_broker_addr: str | None = None
    master_max_offset_seen: int = 0  # the highest offset the master is known to have had
    estimated_loss_bytes: int = 0  # master_max_offset_seen - max_offset
    estimated_loss_messages: int = 0
    connection_age_ms: int = 0
    local_addr: str | None = None  # this end of the connection: the master's addr of it


@dataclass(frozen=True, slots=True)
class HARuntimeInfo:
    master: bool = False
    master_commit_log_max_offset: int = 0
    in_sync_slave_nums: int = 0
    ha_connection_info: list[HAConnectionInfo] = field(default_factory=list)
    ha_client_runtime_info: HAClientRuntimeInfo = field(default_factory=HAClientRuntimeInfo)
    # ---- this engine
    broker_name: str = ""
    broker_addr: str = ""
    ha_server_addr: str = ""
    broker_role: str = ""
    broker_id: int = 0
    epoch: int = 0
    epoch_start_offset: int = 0
    commit_log_min_offset: int = 0
    commit_log_max_offset: int = 0
    average_record_size: int = 0
    writes_refused: str | None = None

    def encode(self) -> bytes:
        return fastjson.dumpb(to_json(self))

    @staticmethod
    def decode(body: bytes) -> HARuntimeInfo:
        """Raises:
        BodyError: the body is not an HARuntimeInfo."""
        return from_json(HARuntimeInfo, fastjson.loads(body))


def average_record_size(store: MessageStore) -> int:
    """Commit-log bytes per consume-queue entry (0 for an empty store): turns bytes into an
    estimate of messages."""
    entries = 0
    for cq in store.queues:
        entries += max(cq.max_offset - cq.min_offset, 0)
    size = store.get_max_phy_offset() - store.get_min_phy_offset()
    return size // entries if entries and size > 0 else 0


def messages_in(nbytes: int, avg: int) -> int:
    """Records in `nbytes` at `avg` bytes each, rounded up (0 when unknown)."""
    return (nbytes + avg - 1) // avg if avg > 0 and nbytes > 0 else 0

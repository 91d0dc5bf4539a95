"""Headers of role switching and epoch fencing (this engine's HA extensions).

NOTIFY_BROKER_ROLE_CHANGED (1008) keeps 5.x's header fields (masterAddress, masterEpoch,
syncStateSetEpoch, masterBrokerId) and adds what a broker outside controller mode needs:
its new id, the master's role and HA address.  A broker whose own address is
`masterAddress` becomes the master, any other becomes its slave.

REGISTER_BROKER carries the broker's epoch history in extra ext fields, and this engine's
name server answers with the fencing verdict (all absent for Apache brokers and name
servers, which ignore them):

| ext field | request | response |
|---|---|---|
| `haEpoch` | the broker's epoch | the epoch of the broker name's current master |
| `haEpochs` | the broker's epoch history | the merged history |
| `haFenced` | | `true`: refused as master, become a slave |
| `haTruncateOffset` | | where a refused master's log diverged (drop from there) |
| `haBrokerId` | | the slave id a refused master should take |

An epoch history is written `epoch:startOffset` pairs joined by `;` (`1:0;2:1048576`):
epoch e's master started writing at that commit-log offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.protocol.errors import HeaderError

EXT_EPOCH = "haEpoch"
EXT_EPOCHS = "haEpochs"
EXT_FENCED = "haFenced"
EXT_TRUNCATE_OFFSET = "haTruncateOffset"
EXT_BROKER_ID = "haBrokerId"

EpochHistory = dict[int, int]
"""epoch -> commit-log offset where that epoch's master started writing."""


def encode_epochs(history: EpochHistory) -> str:
    return ";".join(f"{e}:{o}" for e, o in sorted(history.items()))


def decode_epochs(text: str | None) -> EpochHistory:
    """Raises:
    HeaderError: text that is not `epoch:offset` pairs."""
    out: EpochHistory = {}
    for part in (text or "").split(";"):
        if not part.strip():
            continue
        epoch, sep, offset = part.partition(":")
        try:
            out[int(epoch)] = int(offset)
        except ValueError:
            raise HeaderError(f"{EXT_EPOCHS}: {part!r} is not epoch:offset") from None
        if not sep:
            raise HeaderError(f"{EXT_EPOCHS}: {part!r} is not epoch:offset")
    return out


def truncate_offset_after(history: EpochHistory, epoch: int) -> int | None:
    """Where a master of `epoch` diverged from the masters after it: the smallest start
    offset of a later epoch (None when no later epoch is known)."""
    later = [offset for e, offset in history.items() if e > epoch]
    return min(later) if later else None


@dataclass(frozen=True, slots=True)
class NotifyBrokerRoleChangedRequestHeader:
    master_address: str
    master_epoch: int
    sync_state_set_epoch: int = 0
    master_broker_id: int = 0
    # ---- this engine
    master_ha_address: str | None = None  # the new master's HA address (slaves)
    broker_id: int | None = None  # the id this broker takes as a slave
    broker_role: str | None = None  # ASYNC_MASTER or SYNC_MASTER (the new master)
    epoch_start_offset: int | None = None  # a slave with more than this truncates to it


@dataclass(frozen=True, slots=True)
class RoleChangedResponseHeader:
    broker_role: str
    broker_id: int
    epoch: int
    epoch_start_offset: int
    max_phy_offset: int


@dataclass(frozen=True, slots=True)
class FenceWritesRequestHeader:
    """HA_FENCE_WRITES: refuse (or accept again) every write, keeping the role."""

    fenced: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class FenceWritesResponseHeader:
    max_phy_offset: int
    epoch: int

"""Replication requests: GET_BROKER_HA_STATUS (907), GET_BROKER_EPOCH_CACHE (1007),
NOTIFY_BROKER_ROLE_CHANGED (1008) and this engine's HA_FENCE_WRITES (9001).

* 907 answers 5.x's `HARuntimeInfo` with this engine's additions (`engine/ha/status.py`).
* 1008 keeps 5.x's header (masterAddress, masterEpoch, ...; `engine/protocol/header/ha.py`):
  the broker whose address is masterAddress becomes the master of epoch masterEpoch (role
  brokerRole, default: its current master role, else ASYNC_MASTER); any other becomes a
  slave (brokerId) of masterAddress, truncating what it has past epochStartOffset.  Under a
  5.3 controller (enableControllerMode) the controller-mode service adopts it instead
  (engine/broker/controller_mode.py).
* 9001 makes a master refuse (fenced=true) or accept again (false) every write, keeping its
  role; the answer carries its max offset, final while fenced (a switchover waits for the
  slave to acknowledge exactly that).
Role changes answer SYSTEM_ERROR with the reason when they cannot be made.
"""

from __future__ import annotations

from engine.broker.controller_client import ControllerUnavailable
from engine.broker.role import RoleError, RoleManager
from engine.broker.state import BrokerState
from engine.protocol.body.controller import OPEN_END_OFFSET, EpochEntry, EpochEntryCache
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.ha import (
    FenceWritesRequestHeader,
    FenceWritesResponseHeader,
    NotifyBrokerRoleChangedRequestHeader,
    RoleChangedResponseHeader,
)
from engine.protocol.wire import from_ext, to_ext
from engine.remoting.errors import RemotingError
from engine.remoting.router import RequestContext, Router
from engine.store.config import BrokerRole

router = Router()

Ctx = RequestContext[BrokerState]
NOT_RUNNING = "replication is not running yet"


@router.handles(RequestCode.GET_BROKER_HA_STATUS)
def get_broker_ha_status(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    roles = ctx.state.roles
    if roles is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, NOT_RUNNING)
    return cmd.response(body=roles.runtime_info().encode())


def _role_answer(cmd: RemotingCommand, st: BrokerState, roles: RoleManager) -> RemotingCommand:
    header = RoleChangedResponseHeader(
        st.store_config.broker_role.value, st.config.broker_id, roles.epoch,
        roles.epoch_start_offset, st.store.get_max_phy_offset())
    return cmd.response(ext_fields=to_ext(header))


@router.handles(RequestCode.NOTIFY_BROKER_ROLE_CHANGED)
async def notify_broker_role_changed(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    st = ctx.state
    roles = st.roles
    if roles is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, NOT_RUNNING)
    h = from_ext(NotifyBrokerRoleChangedRequestHeader, cmd.ext_fields)
    if st.controller_mode is not None:  # from a 5.3 controller: the ids are the controller's
        try:
            await st.controller_mode.on_notify(h)
        except (RoleError, RemotingError, ControllerUnavailable) as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        return _role_answer(cmd, st, roles)
    try:
        if h.master_address == st.config.broker_addr:
            current = st.store_config.broker_role
            default = current if current is not BrokerRole.SLAVE else BrokerRole.ASYNC_MASTER
            try:
                role = BrokerRole(h.broker_role) if h.broker_role else default
            except ValueError:
                return cmd.response(ResponseCode.SYSTEM_ERROR,
                                    f"brokerRole {h.broker_role!r}: use ASYNC_MASTER or "
                                    "SYNC_MASTER")
            await roles.become_master(h.master_epoch, role)
        else:
            if h.broker_id is None:
                return cmd.response(ResponseCode.SYSTEM_ERROR,
                                    "brokerId is required to become a slave")
            await roles.become_slave(h.master_address, h.master_ha_address, h.broker_id,
                                     h.master_epoch, h.epoch_start_offset)
    except RoleError as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
    return _role_answer(cmd, st, roles)


@router.handles(RequestCode.GET_BROKER_EPOCH_CACHE)
def get_broker_epoch_cache(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    """5.x GET_BROKER_EPOCH_CACHE: this broker's epoch history (each epoch ends where the
    next one starts; the last one is open)."""
    st = ctx.state
    roles = st.roles
    if roles is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, NOT_RUNNING)
    starts = sorted(roles.history.items())
    entries = [EpochEntry(epoch, start, starts[i + 1][1] if i + 1 < len(starts)
                          else OPEN_END_OFFSET) for i, (epoch, start) in enumerate(starts)]
    mode = st.controller_mode
    cache = EpochEntryCache(st.config.broker_cluster_name, st.config.broker_name,
                            mode.broker_id or 0 if mode is not None else st.config.broker_id,
                            entries, st.store.get_max_phy_offset())
    return cmd.response(body=cache.encode())


@router.handles(RequestCode.HA_FENCE_WRITES)
def ha_fence_writes(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    st = ctx.state
    roles = st.roles
    if roles is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, NOT_RUNNING)
    h = from_ext(FenceWritesRequestHeader, cmd.ext_fields)
    try:
        if h.fenced:
            offset = roles.fence(h.reason or f"requested by {ctx.connection.remote_addr}")
        else:
            roles.unfence()
            offset = st.store.get_max_phy_offset()
    except RoleError as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
    return cmd.response(ext_fields=to_ext(FenceWritesResponseHeader(offset, roles.epoch)))

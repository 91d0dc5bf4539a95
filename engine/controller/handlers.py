"""The controller's request handlers (5.3.3 `ControllerRequestProcessor`), one per code."""

from __future__ import annotations

import logging

from engine.common import config as configlib
from engine.common.config import ConfigError
from engine.common.properties import PropertiesError, loads
from engine.controller.manager import ControllerManager
from engine.controller.replicas import Outcome
from engine.protocol.body.controller import SyncStateSet, decode_broker_names
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from engine.protocol.wire import from_ext, to_ext
from engine.remoting.router import RequestContext, Router

router = Router()
log = logging.getLogger("engine.controller")

Ctx = RequestContext[ControllerManager]


def build_router() -> Router:
    return Router().include(router)


def _answer(cmd: RemotingCommand, outcome: Outcome) -> RemotingCommand:
    ext = to_ext(outcome.header) if outcome.header is not None else None
    return cmd.response(outcome.code, outcome.remark, ext or None, outcome.body)


@router.handles(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET)
async def alter_sync_state_set(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    req = from_ext(AlterSyncStateSetRequestHeader, cmd.ext_fields)
    proposed = SyncStateSet.decode(cmd.body, "CONTROLLER_ALTER_SYNC_STATE_SET")
    m = ctx.state
    return _answer(cmd, await m.run(lambda: m.state.alter_sync_state_set(req, proposed,
                                                                          m.alive)))


@router.handles(RequestCode.CONTROLLER_ELECT_MASTER)
async def elect_master(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    return _answer(cmd, await ctx.state.elect(from_ext(ElectMasterRequestHeader,
                                                       cmd.ext_fields)))


@router.handles(RequestCode.CONTROLLER_GET_REPLICA_INFO)
async def get_replica_info(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    req = from_ext(GetReplicaInfoRequestHeader, cmd.ext_fields)
    m = ctx.state
    return _answer(cmd, await m.run(lambda: m.state.replica_info(req.broker_name)))


@router.handles(RequestCode.CONTROLLER_GET_METADATA_INFO)
def get_metadata(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    return cmd.response(ext_fields=to_ext(ctx.state.metadata()))


@router.handles(RequestCode.BROKER_HEARTBEAT)
def broker_heartbeat(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    req = from_ext(BrokerHeartbeatRequestHeader, cmd.ext_fields)
    if req.broker_id is None:
        return cmd.response(ResponseCode.CONTROLLER_INVALID_REQUEST,
                            "Heart beat with empty brokerId")
    ctx.state.live.on_heartbeat(req, ctx.connection)
    return cmd.response(remark="Heart beat success")


@router.handles(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA)
async def get_sync_state_data(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    names = decode_broker_names(cmd.body)
    if not names:
        return cmd.response()
    m = ctx.state
    return _answer(cmd, await m.run(lambda: m.state.sync_state_data(names, m.alive)))


@router.handles(RequestCode.CLEAN_BROKER_DATA)
async def clean_broker_data(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    req = from_ext(CleanControllerBrokerDataRequestHeader, cmd.ext_fields)
    m = ctx.state
    return _answer(cmd, await m.run(lambda: m.state.clean_broker_data(req, m.alive)))


@router.handles(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID)
async def get_next_broker_id(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    req = from_ext(GetNextBrokerIdRequestHeader, cmd.ext_fields)
    m = ctx.state
    return _answer(cmd, await m.run(lambda: m.state.next_broker_id(req)))


@router.handles(RequestCode.CONTROLLER_APPLY_BROKER_ID)
async def apply_broker_id(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    req = from_ext(ApplyBrokerIdRequestHeader, cmd.ext_fields)
    m = ctx.state
    return _answer(cmd, await m.run(lambda: m.state.apply_broker_id(req)))


@router.handles(RequestCode.CONTROLLER_REGISTER_BROKER)
async def register_broker(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    req = from_ext(RegisterBrokerToControllerRequestHeader, cmd.ext_fields)
    m = ctx.state
    return _answer(cmd, await m.run(lambda: m.state.register_broker(req, m.alive)))


@router.handles(RequestCode.GET_CONTROLLER_CONFIG)
def get_controller_config(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    text = configlib.render(ctx.state.config)
    return cmd.response(body=text.encode() if text else None)


@router.handles(RequestCode.UPDATE_CONTROLLER_CONFIG)
def update_controller_config(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    log.info("updateConfig called by %s", ctx.connection.remote_addr)
    if cmd.body is None:
        return cmd.response()
    try:
        props = loads(cmd.body.decode("utf-8", errors="replace"))
    except PropertiesError:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "string2Properties error")
    if ctx.state.config.protected_keys() & props.keys():
        return cmd.response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    try:
        ctx.state.config, ignored = configlib.load(type(ctx.state.config), props,
                                                   base=ctx.state.config)
    except ConfigError as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
    if ignored:
        log.warning("updateConfig ignored unknown keys: %s", ", ".join(ignored))
    return cmd.response()

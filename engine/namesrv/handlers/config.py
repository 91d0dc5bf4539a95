"""GET_NAMESRV_CONFIG and UPDATE_NAMESRV_CONFIG: the settings as properties text."""

from __future__ import annotations

import logging

from engine.common.config import ConfigError
from engine.common.properties import PropertiesError, loads
from engine.namesrv.config import PROTECTED_KEYS
from engine.namesrv.state import NamesrvState
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.remoting.router import RequestContext, Router

router = Router()
log = logging.getLogger("engine.namesrv")

Ctx = RequestContext[NamesrvState]


@router.handles(RequestCode.GET_NAMESRV_CONFIG)
def get_config(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    text = ctx.state.config_text()
    return cmd.response(body=text.encode() if text else None)


@router.handles(RequestCode.UPDATE_NAMESRV_CONFIG)
async def update_config(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    log.info("updateConfig called by %s", ctx.connection.remote_addr)
    if cmd.body is None:
        return cmd.response()
    try:
        props = loads(cmd.body.decode("utf-8", errors="replace"))
    except PropertiesError:
        log.error("updateConfig string2Properties error %r", cmd.body)
        return cmd.response(ResponseCode.SYSTEM_ERROR, "string2Properties error")
    if PROTECTED_KEYS & props.keys():
        return cmd.response(ResponseCode.NO_PERMISSION, "Can not update config path")
    try:
        ignored = ctx.state.update_config(props)
    except ConfigError as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
    if ignored:
        log.warning("updateConfig ignored unknown keys: %s", ", ".join(ignored))
    await ctx.state.persist_config()
    return cmd.response()

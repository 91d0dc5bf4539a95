"""Broker handlers: 4.9's ACL 1.0 admin codes (50-54) on plain_acl.yml, when aclEnable=true.

As 4.9.7's `AdminBrokerProcessor`: UPDATE_AND_CREATE_ACL_CONFIG (50), DELETE_ACL_CONFIG (51)
and UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53) change the ACL files under ROCKETMQ_HOME (failures
answer 209, 210 and 211 with the reason); GET_BROKER_CLUSTER_ACL_INFO (52) answers the files'
data versions in its header and GET_BROKER_CLUSTER_ACL_CONFIG (54) the accounts.  Changes
take effect at once (the files are re-read).  Without aclEnable the broker runs ACL 2.0 only,
like 5.3.3, and these codes answer with what to use instead.
"""

from __future__ import annotations

import json
import logging

from engine.auth.errors import AuthError
from engine.auth.plain_acl import default_file
from engine.auth.plain_acl_write import delete_account, update_account, update_global_whites
from engine.broker.access import BrokerAccess
from engine.broker.state import BrokerState
from engine.protocol import fastjson
from engine.protocol.body.auth import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    GetBrokerClusterAclConfigResponseBody,
    PlainAccessConfig,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.signature import ACCESS_KEY
from engine.protocol.wire import from_ext, to_ext, to_json
from engine.remoting.router import RequestContext, Router

router = Router()
log = logging.getLogger("engine.auth")

Ctx = RequestContext[BrokerState]

OFF = ("ACL 1.0 is off on this broker (aclEnable=false); manage users and rules with "
       "createUser/createAcl (ACL 2.0)")


def _home(ctx: Ctx) -> tuple[BrokerAccess, str] | None:
    access = ctx.state.access
    if access is None or access.store.rocketmq_home is None:
        return None
    return access, access.store.rocketmq_home


def _split(text: str | None) -> list[str] | None:
    parts = [p.strip() for p in (text or "").split(",") if p.strip()]
    return parts or None


def _change(ctx: Ctx, cmd: RemotingCommand, failed: int, work: str) -> RemotingCommand:
    found = _home(ctx)
    if found is None:
        return cmd.response(failed, OFF)
    access, home = found
    try:
        if cmd.code == RequestCode.UPDATE_AND_CREATE_ACL_CONFIG:
            h = from_ext(CreateAccessConfigRequestHeader, cmd.ext_fields)
            path = update_account(home, PlainAccessConfig(
                h.access_key, h.secret_key, h.white_remote_address, h.admin,
                h.default_topic_perm, h.default_group_perm, _split(h.topic_perms),
                _split(h.group_perms)))
        elif cmd.code == RequestCode.DELETE_ACL_CONFIG:
            d = from_ext(DeleteAccessConfigRequestHeader, cmd.ext_fields)
            path = delete_account(home, d.access_key or "")
        else:
            g = from_ext(UpdateGlobalWhiteAddrsConfigRequestHeader, cmd.ext_fields)
            path = update_global_whites(home, _split(g.global_white_addrs) or [],
                                        g.acl_file_full_path or None)
    except AuthError as exc:
        return cmd.response(failed, f"{work} failed: {exc}")
    access.store.reload(force=True)
    log.info("%s in %s (by %s from %s)", work, path, cmd.ext(ACCESS_KEY),
             ctx.connection.remote_addr)
    return cmd.response()


@router.handles(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG)
def update_acl_config(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    return _change(ctx, cmd, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
                   f"updating account {cmd.ext('accessKey')!r}")


@router.handles(RequestCode.DELETE_ACL_CONFIG)
def delete_acl_config(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    return _change(ctx, cmd, ResponseCode.DELETE_ACL_CONFIG_FAILED,
                   f"deleting account {cmd.ext('accessKey')!r}")


@router.handles(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)
def update_global_white_addrs(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    return _change(ctx, cmd, ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                   "updating globalWhiteRemoteAddresses")


def _version(v: dict[str, int]) -> dict[str, int]:
    return {"counter": v.get("counter", 0), "stateVersion": 0,
            "timestamp": v.get("timestamp", 0)}


@router.handles(RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
def acl_config_version(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    found = _home(ctx)
    if found is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, OFF)
    access, home = found
    versions = access.store.v1.versions if access.store.v1 else {}
    cfg = ctx.state.config
    header = GetBrokerAclConfigResponseHeader(
        version=json.dumps(_version(versions.get(default_file(home), {}))),
        all_acl_file_version=json.dumps({p: _version(v) for p, v in versions.items()}),
        broker_name=cfg.broker_name, broker_addr=cfg.broker_addr,
        cluster_name=cfg.broker_cluster_name)
    return cmd.response(ext_fields=to_ext(header))


@router.handles(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
def acl_config(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    found = _home(ctx)
    if found is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, OFF)
    v1 = found[0].store.v1
    body = GetBrokerClusterAclConfigResponseBody(
        list(v1.global_white_addrs) if v1 else [],
        [account for _, account in v1.accounts.values()] if v1 else [])
    return cmd.response(body=fastjson.dumps(to_json(body)).encode())

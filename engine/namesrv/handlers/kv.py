"""KV config requests: PUT/GET/DELETE_KV_CONFIG and GET_KVLIST_BY_NAMESPACE."""

from __future__ import annotations

from engine.namesrv.state import NamesrvState
from engine.protocol import fastjson
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.namesrv import (
    DeleteKVConfigRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    PutKVConfigRequestHeader,
)
from engine.protocol.wire import from_ext, to_ext, to_json
from engine.remoting.router import RequestContext, Router

router = Router()

Ctx = RequestContext[NamesrvState]


@router.handles(RequestCode.PUT_KV_CONFIG)
async def put_kv_config(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(PutKVConfigRequestHeader, cmd.ext_fields)
    ctx.state.kv.put(header.namespace, header.key, header.value)
    await ctx.state.persist_kv()
    return cmd.response()


@router.handles(RequestCode.GET_KV_CONFIG)
def get_kv_config(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(GetKVConfigRequestHeader, cmd.ext_fields)
    value = ctx.state.kv.get(header.namespace, header.key)
    if value is not None:
        return cmd.response(ext_fields=to_ext(GetKVConfigResponseHeader(value)))
    return cmd.response(
        ResponseCode.QUERY_NOT_FOUND,
        f"No config item, Namespace: {header.namespace} Key: {header.key}",
        ext_fields=to_ext(GetKVConfigResponseHeader()),
    )


@router.handles(RequestCode.DELETE_KV_CONFIG)
async def delete_kv_config(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(DeleteKVConfigRequestHeader, cmd.ext_fields)
    ctx.state.kv.delete(header.namespace, header.key)
    await ctx.state.persist_kv()
    return cmd.response()


@router.handles(RequestCode.GET_KVLIST_BY_NAMESPACE)
def get_kv_list(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(GetKVListByNamespaceRequestHeader, cmd.ext_fields)
    table = ctx.state.kv.namespace(header.namespace)
    if table is not None:
        return cmd.response(body=fastjson.dumpb(to_json(table)))
    return cmd.response(ResponseCode.QUERY_NOT_FOUND,
                        f"No config item, Namespace: {header.namespace}")

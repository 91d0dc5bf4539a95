"""Broker-facing requests: REGISTER/UNREGISTER_BROKER, QUERY_DATA_VERSION, write-perm switches.

A registration that carries an epoch (this engine's brokers, see `engine.protocol.header.ha`)
goes through the epoch table first: a master refused there is not registered, and its answer
names the accepted master, where to truncate and which slave id to take.
"""

from __future__ import annotations

import logging
import zlib

from engine.namesrv.epochs import Verdict
from engine.namesrv.kvconfig import NAMESPACE_ORDER_TOPIC_CONFIG
from engine.namesrv.state import NamesrvState
from engine.protocol import fastjson
from engine.protocol.body.decode import request_body
from engine.protocol.body.register import RegisterBrokerBody
from engine.protocol.body.topic import DataVersion, TopicConfigSerializeWrapper
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.errors import HeaderError
from engine.protocol.header.ha import (
    EXT_BROKER_ID,
    EXT_EPOCH,
    EXT_EPOCHS,
    EXT_FENCED,
    EXT_TRUNCATE_OFFSET,
    decode_epochs,
    encode_epochs,
)
from engine.protocol.header.namesrv import (
    AddWritePermOfBrokerResponseHeader,
    BrokerNameRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from engine.protocol.version import V3_0_11
from engine.protocol.wire import from_ext, to_ext, to_json
from engine.remoting.router import RequestContext, Router

router = Router()
log = logging.getLogger("engine.namesrv")

Ctx = RequestContext[NamesrvState]


def body_crc32(body: bytes | None) -> int:
    """`UtilAll.crc32`: CRC32 of the body masked to a non-negative Java int (0 for no body)."""
    return zlib.crc32(body) & 0x7FFFFFFF if body else 0


def _decode_registration(cmd: RemotingCommand, header: RegisterBrokerRequestHeader
                         ) -> tuple[TopicConfigSerializeWrapper, list[str] | None]:
    """The topic table and filter servers of a registration (None: keep the filter table)."""
    if cmd.version < V3_0_11:  # pre-3.0.11 brokers send the bare topic wrapper
        wrapper = (request_body(cmd, TopicConfigSerializeWrapper) if cmd.body
                   else TopicConfigSerializeWrapper())
        return wrapper, None
    body = RegisterBrokerBody.decode(cmd.body, header.compressed)
    return body.topic_config_serialize_wrapper, body.filter_server_list


@router.handles(RequestCode.REGISTER_BROKER)
def register_broker(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(RegisterBrokerRequestHeader, cmd.ext_fields)
    if header.body_crc32 != 0 and body_crc32(cmd.body) != header.body_crc32:
        log.warning("receive registerBroker request,crc32 not match,from %s",
                    ctx.connection.remote_addr)
        return cmd.response(ResponseCode.SYSTEM_ERROR, "crc32 not match",
                            ext_fields=to_ext(RegisterBrokerResponseHeader()))
    wrapper, servers = _decode_registration(cmd, header)
    state = ctx.state
    verdict = _epoch_verdict(state, header, cmd.ext_fields or {})
    if verdict is not None and verdict.fenced:
        log.warning("refused %s (%s) as master of %s: epoch %s is behind epoch %d of %s",
                    header.broker_addr, header.broker_id, header.broker_name,
                    (cmd.ext_fields or {}).get(EXT_EPOCH), verdict.epoch, verdict.master_addr)
        return cmd.response(ext_fields=_fenced_answer(state, verdict))
    known = header.broker_addr in state.routes.live
    result = state.routes.register_broker(
        header.cluster_name, header.broker_addr, header.broker_name, header.broker_id,
        header.ha_server_addr, wrapper, servers, ctx.connection,
    )
    if not known:
        log.info("new broker registered, %s HAServer: %s", header.broker_addr,
                 header.ha_server_addr)
    order_conf = state.kv.namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
    ext = to_ext(RegisterBrokerResponseHeader(result.ha_server_addr, result.master_addr))
    if verdict is not None:
        ext[EXT_EPOCH] = str(verdict.epoch)
        ext[EXT_EPOCHS] = encode_epochs(verdict.history)
    return cmd.response(
        ext_fields=ext,
        body=fastjson.dumpb(to_json(order_conf)) if order_conf is not None else None,
    )


def _epoch_verdict(state: NamesrvState, header: RegisterBrokerRequestHeader,
                   ext: dict[str, str]) -> Verdict | None:
    """The epoch table's verdict on a registration that carries an epoch, else None."""
    raw = ext.get(EXT_EPOCH)
    if raw is None:
        return None
    try:
        epoch = int(raw)
        history = decode_epochs(ext.get(EXT_EPOCHS))
    except (ValueError, HeaderError) as exc:
        log.warning("ignoring the epoch of %s: %s", header.broker_addr, exc)
        return None
    routes = state.routes
    group = routes.brokers.get(header.broker_name)
    used = [i for i, a in group.addrs.items() if a != header.broker_addr] if group else []
    return state.epochs.check(header.broker_name, header.broker_addr, header.broker_id, epoch,
                              history, used, lambda addr: addr in routes.live)


def _fenced_answer(state: NamesrvState, verdict: Verdict) -> dict[str, str]:
    master = verdict.master_addr
    live = state.routes.live.get(master) if master else None
    ext = to_ext(RegisterBrokerResponseHeader(live.ha_server_addr if live else None,
                                              master if live else None))
    ext[EXT_EPOCH] = str(verdict.epoch)
    ext[EXT_EPOCHS] = encode_epochs(verdict.history)
    ext[EXT_FENCED] = "true"
    if verdict.truncate_offset is not None:
        ext[EXT_TRUNCATE_OFFSET] = str(verdict.truncate_offset)
    if verdict.slave_id is not None:
        ext[EXT_BROKER_ID] = str(verdict.slave_id)
    return ext


@router.handles(RequestCode.UNREGISTER_BROKER)
def unregister_broker(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(UnRegisterBrokerRequestHeader, cmd.ext_fields)
    ctx.state.routes.unregister_broker(header.cluster_name, header.broker_addr,
                                       header.broker_name, header.broker_id)
    log.info("unregisterBroker %s %s (%s) id %d", header.cluster_name, header.broker_name,
             header.broker_addr, header.broker_id)
    return cmd.response()


@router.handles(RequestCode.QUERY_DATA_VERSION)
def query_data_version(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(QueryDataVersionRequestHeader, cmd.ext_fields)
    version = request_body(cmd, DataVersion)
    routes = ctx.state.routes
    changed = routes.is_data_version_changed(header.broker_addr, version)
    if not changed:
        routes.touch(header.broker_addr)
    current = routes.data_version_of(header.broker_addr)
    return cmd.response(
        ext_fields=to_ext(QueryDataVersionResponseHeader(changed)),
        body=fastjson.dumpb(to_json(current)) if current is not None else None,
    )


@router.handles(RequestCode.WIPE_WRITE_PERM_OF_BROKER)
def wipe_write_perm(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(BrokerNameRequestHeader, cmd.ext_fields)
    count = ctx.state.routes.wipe_write_perm(header.broker_name)
    log.info("wipe write perm of broker[%s], client: %s, %d", header.broker_name,
             ctx.connection.remote_addr, count)
    return cmd.response(ext_fields=to_ext(WipeWritePermOfBrokerResponseHeader(count)))


@router.handles(RequestCode.ADD_WRITE_PERM_OF_BROKER)
def add_write_perm(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(BrokerNameRequestHeader, cmd.ext_fields)
    count = ctx.state.routes.add_write_perm(header.broker_name)
    log.info("add write perm of broker[%s], client: %s, %d", header.broker_name,
             ctx.connection.remote_addr, count)
    return cmd.response(ext_fields=to_ext(AddWritePermOfBrokerResponseHeader(count)))

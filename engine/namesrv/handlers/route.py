"""Route queries: GET_ROUTEINFO_BY_TOPIC, cluster info, topic lists, DELETE_TOPIC_IN_NAMESRV."""

from __future__ import annotations

import re
from typing import Any

from engine.namesrv.kvconfig import NAMESPACE_ORDER_TOPIC_CONFIG
from engine.namesrv.state import NamesrvState
from engine.protocol import fastjson
from engine.protocol.body.route import TopicList
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.namesrv import (
    DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
)
from engine.protocol.version import V4_9_4
from engine.protocol.wire import from_ext, to_json
from engine.remoting.router import RequestContext, Router

router = Router()

Ctx = RequestContext[NamesrvState]

#: `FAQUrl.suggestTodo(FAQUrl.APPLY_TOPIC_URL)` in 4.9.7.
APPLY_TOPIC_TIP = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."

_BROWSER_UNSAFE = re.compile(r"[/\x7f-\uffff]")


def _browser_escape(match: re.Match[str]) -> str:
    ch = match.group()
    return "\\/" if ch == "/" else f"\\u{ord(ch):04X}"


def browser_compatible(text: str) -> str:
    """fastjson's BrowserCompatible: `/` as `\\/`, every char >= 0x7F as `\\uXXXX`.

    Only ever applied to JSON text, where those characters can occur only inside strings.
    """
    if text.isascii() and "/" not in text and "\x7f" not in text:
        return text
    # Characters outside the BMP become two escaped UTF-16 surrogates, as in Java.
    utf16 = text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
    wide = "".join(
        chr(0xD800 + ((ord(c) - 0x10000) >> 10)) + chr(0xDC00 + ((ord(c) - 0x10000) & 0x3FF))
        if ord(c) > 0xFFFF else c
        for c in utf16
    )
    return _BROWSER_UNSAFE.sub(_browser_escape, wide)


def encode_route(value: Any, standard: bool) -> bytes:
    """A route body in fastjson's default form, or BrowserCompatible standard JSON."""
    if not standard:
        return fastjson.dumpb(value)
    return browser_compatible(fastjson.dumps(value, standard=True)).encode()


@router.handles(RequestCode.GET_ROUTEINFO_BY_TOPIC)
def get_route_info(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(GetRouteInfoRequestHeader, cmd.ext_fields)
    state = ctx.state
    standard = cmd.version >= V4_9_4 or header.accept_standard_json_only is True
    order_conf = (state.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, header.topic)
                  if state.config.order_message_enable else None)
    cache = state.route_bodies
    routes = state.routes
    if cache.generation != routes.generation:
        cache.reset(routes.generation)
    key = (header.topic, standard, order_conf)
    body = cache.bodies.get(key)
    if body is None:
        route = routes.pickup_route(header.topic)
        if route is None:
            return cmd.response(
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {header.topic}"
                f"{APPLY_TOPIC_TIP}",
            )
        doc = to_json(route)
        if order_conf is not None:
            doc["orderTopicConf"] = order_conf
        body = cache.bodies[key] = encode_route(doc, standard)
    return cmd.response(body=body)


def _topic_list(cmd: RemotingCommand, topics: TopicList) -> RemotingCommand:
    return cmd.response(body=fastjson.dumpb(to_json(topics)))


@router.handles(RequestCode.GET_BROKER_CLUSTER_INFO)
def get_cluster_info(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    # Always fastjson's default form, whatever the client version (also in 5.x).
    return cmd.response(body=fastjson.dumpb(to_json(ctx.state.routes.cluster_info())))


@router.handles(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
def get_all_topics(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    return _topic_list(cmd, ctx.state.routes.all_topics())


@router.handles(RequestCode.GET_TOPICS_BY_CLUSTER)
def get_topics_by_cluster(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(GetTopicsByClusterRequestHeader, cmd.ext_fields)
    return _topic_list(cmd, ctx.state.routes.topics_by_cluster(header.cluster))


@router.handles(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
def get_system_topics(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    return _topic_list(cmd, ctx.state.routes.system_topics())


@router.handles(RequestCode.GET_UNIT_TOPIC_LIST)
def get_unit_topics(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    return _topic_list(cmd, ctx.state.routes.unit_topics())


@router.handles(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST)
def get_has_unit_sub_topics(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    return _topic_list(cmd, ctx.state.routes.has_unit_sub_topics())


@router.handles(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST)
def get_has_unit_sub_ununit_topics(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    return _topic_list(cmd, ctx.state.routes.has_unit_sub_ununit_topics())


@router.handles(RequestCode.DELETE_TOPIC_IN_NAMESRV)
def delete_topic(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(DeleteTopicFromNamesrvRequestHeader, cmd.ext_fields)
    ctx.state.routes.delete_topic(header.topic, header.cluster_name or None)
    return cmd.response()

"""What each request needs: the resources it touches and the actions any one of which allows it.

How this works: 5.3 derives this from `DefaultAuthorizationContextBuilder` (send, pull,
heartbeat, offsets, locks by hand) and the `@RocketMQAction`/`@RocketMQResource` annotations of
the request headers; codes without an annotated header are not checked at all there (e.g.
UPDATE_BROKER_CONFIG, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).  Here every code the broker
handles has an entry, and a request that names no topic or group is checked against the
cluster, so nothing is allowed by omission.  A retry topic (`%RETRY%g`) counts as its group.
Deviation from 5.3, so that a consumer granted Sub works: the offset reads consumers make
(GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST_MSG_STORETIME) accept Sub or
Get (5.3: Get only).  An entry's actions are alternatives: a rule granting any one allows.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.auth.model import Action, Resource, ResourcePattern, ResourceType
from engine.protocol import fastjson
from engine.protocol.body.heartbeat import HeartbeatData
from engine.protocol.body.lock import LockBatchRequestBody
from engine.protocol.body.subscription import SubscriptionGroupConfig
from engine.protocol.codes import RequestCode as C
from engine.protocol.command import RemotingCommand
from engine.protocol.wire import from_json

Need = tuple[Resource, tuple[Action, ...]]

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"

T, G, K = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
PUB, SUB, GET, LIST = (Action.PUB,), (Action.SUB,), (Action.GET,), (Action.LIST,)
CREATE, UPDATE, DELETE = (Action.CREATE,), (Action.UPDATE,), (Action.DELETE,)
SUB_GET, SUB_UPDATE, GET_LIST = (Action.SUB, Action.GET), (Action.SUB, Action.UPDATE), \
    (Action.GET, Action.LIST)


def group(name: str) -> Resource:
    for prefix in (RETRY_PREFIX, DLQ_PREFIX):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return Resource(G, name, ResourcePattern.LITERAL)


def topic_or_group(name: str) -> Resource:
    """A topic, or its group when it is a retry topic (5.3 `buildContextByAnnotation`)."""
    if name.startswith(RETRY_PREFIX):
        return group(name)
    return Resource(T, name, ResourcePattern.LITERAL)


def cluster(name: str) -> Resource:
    return Resource(K, name, ResourcePattern.LITERAL)


#: Header-driven codes: (resource type, extFields key, list separator) and the actions.
_FieldSpec = tuple[ResourceType, str, str]
_TABLE: dict[int, tuple[tuple[_FieldSpec, ...], tuple[Action, ...]]] = {
    C.QUERY_MESSAGE: (((T, "topic", ""),), SUB_GET),
    C.SEARCH_OFFSET_BY_TIMESTAMP: (((T, "topic", ""),), SUB_GET),
    C.GET_MAX_OFFSET: (((T, "topic", ""),), SUB_GET),
    C.GET_MIN_OFFSET: (((T, "topic", ""),), SUB_GET),
    C.GET_EARLIEST_MSG_STORETIME: (((T, "topic", ""),), SUB_GET),
    C.GET_CONSUMER_LIST_BY_GROUP: (((G, "consumerGroup", ""),), SUB_GET),
    C.CHECK_CLIENT_CONFIG: (((G, "group", ""),), SUB),
    C.UPDATE_AND_CREATE_TOPIC: (((T, "topic", ""),), CREATE),
    C.DELETE_TOPIC_IN_BROKER: (((T, "topic", ""),), DELETE),
    C.DELETE_SUBSCRIPTIONGROUP: (((G, "groupName", ""),), DELETE),
    C.GET_TOPIC_STATS_INFO: (((T, "topic", ""),), GET),
    C.GET_CONSUMER_CONNECTION_LIST: (((G, "consumerGroup", ""),), GET),
    C.GET_CONSUME_STATS: (((G, "consumerGroup", ""), (T, "topic", "")), GET),
    C.INVOKE_BROKER_TO_RESET_OFFSET: (((G, "group", ""), (T, "topic", "")), UPDATE),
    C.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: (((T, "topic", ""), (G, "group", "")), GET),
    C.QUERY_TOPIC_CONSUME_BY_WHO: (((T, "topic", ""),), GET),
    C.QUERY_CONSUME_TIME_SPAN: (((T, "topic", ""), (G, "group", "")), GET),
    C.GET_CONSUMER_RUNNING_INFO: (((G, "consumerGroup", ""),), GET),
    C.QUERY_CORRECTION_OFFSET: (((G, "filterGroups", ","), (G, "compareGroup", ""),
                                  (T, "topic", "")), GET),
    C.CONSUME_MESSAGE_DIRECTLY: (((G, "consumerGroup", ""), (T, "topic", "")), SUB),
    C.CLONE_GROUP_OFFSET: (((G, "destGroup", ""), (T, "topic", "")), UPDATE),
    C.QUERY_CONSUME_QUEUE: (((T, "topic", ""), (G, "consumerGroup", "")), GET),
    # cluster-wide: no resource field, checked against Cluster:<brokerClusterName>
    C.GET_ALL_TOPIC_CONFIG: ((), GET_LIST),
    C.GET_ALL_CONSUMER_OFFSET: ((), GET_LIST),
    C.GET_ALL_DELAY_OFFSET: ((), GET_LIST),
    C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: ((), GET_LIST),
    C.UPDATE_BROKER_CONFIG: ((), UPDATE),
    C.GET_BROKER_CONFIG: ((), GET),
    C.GET_BROKER_RUNTIME_INFO: ((), GET),
    C.GET_PRODUCER_CONNECTION_LIST: ((), GET),
    C.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: ((), GET),
    C.CLEAN_EXPIRED_CONSUMEQUEUE: ((), UPDATE),
    C.VIEW_BROKER_STATS_DATA: ((), GET),
    C.CLEAN_UNUSED_TOPIC: ((), UPDATE),
    C.GET_BROKER_CONSUME_STATS: ((), GET),
    C.GET_ALL_PRODUCER_INFO: ((), GET),
    C.DELETE_EXPIRED_COMMITLOG: ((), UPDATE),
    C.GET_BROKER_HA_STATUS: ((), GET),
    C.NOTIFY_BROKER_ROLE_CHANGED: ((), UPDATE),
    C.HA_FENCE_WRITES: ((), UPDATE),
    C.AUTH_CREATE_USER: ((), UPDATE),
    C.AUTH_UPDATE_USER: ((), UPDATE),
    C.AUTH_DELETE_USER: ((), UPDATE),
    C.AUTH_GET_USER: ((), GET),
    C.AUTH_LIST_USER: ((), GET),
    C.AUTH_CREATE_ACL: ((), UPDATE),
    C.AUTH_UPDATE_ACL: ((), UPDATE),
    C.AUTH_DELETE_ACL: ((), UPDATE),
    C.AUTH_GET_ACL: ((), GET),
    C.AUTH_LIST_ACL: ((), GET),
    C.UPDATE_AND_CREATE_ACL_CONFIG: ((), UPDATE),
    C.DELETE_ACL_CONFIG: ((), UPDATE),
    C.GET_BROKER_CLUSTER_ACL_INFO: ((), GET),
    C.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: ((), UPDATE),
    C.GET_BROKER_CLUSTER_ACL_CONFIG: ((), GET),
}


def _ext(cmd: RemotingCommand, key: str) -> str:
    return (cmd.ext_fields or {}).get(key) or ""


def _send(topic_key: str, group_key: str) -> Callable[[RemotingCommand], list[Need]]:
    def needs(cmd: RemotingCommand) -> list[Need]:
        topic = _ext(cmd, topic_key)
        if topic.startswith(RETRY_PREFIX):  # a consumer sending back: Sub on its group
            return [(group(_ext(cmd, group_key) or topic), SUB)]
        return [(Resource(T, topic), PUB)]
    return needs


def _topic_and_group(topic_key: str, group_key: str, actions: tuple[Action, ...]
                     ) -> Callable[[RemotingCommand], list[Need]]:
    def needs(cmd: RemotingCommand) -> list[Need]:
        topic = _ext(cmd, topic_key)
        out: list[Need] = []
        if not topic.startswith(RETRY_PREFIX):
            out.append((Resource(T, topic), actions))
        out.append((group(_ext(cmd, group_key)), actions))
        return out
    return needs


def _heartbeat(cmd: RemotingCommand) -> list[Need]:
    data = from_json(HeartbeatData, fastjson.loads(cmd.body or b"{}"))
    out: list[Need] = []
    for consumer in data.consumer_data_set:
        out.append((group(consumer.group_name), SUB))
        for sub in consumer.subscription_data_set:
            if not sub.topic.startswith(RETRY_PREFIX):
                out.append((Resource(T, sub.topic), SUB))
    return out


def _locks(cmd: RemotingCommand) -> list[Need]:
    body = from_json(LockBatchRequestBody, fastjson.loads(cmd.body or b"{}"))
    out: list[Need] = [(group(body.consumer_group), SUB)]
    for mq in body.mq_set:
        if not mq.topic.startswith(RETRY_PREFIX):
            out.append((Resource(T, mq.topic), SUB))
    return out


def _unregister(cmd: RemotingCommand) -> list[Need]:
    name = _ext(cmd, "consumerGroup")
    return [(group(name), SUB)] if name else []


def _end_transaction(cmd: RemotingCommand) -> list[Need]:
    topic = _ext(cmd, "topic")  # 5.x clients send it; 4.9 clients do not (then: signed only)
    return [(Resource(T, topic), PUB)] if topic else []


def _create_group(cmd: RemotingCommand) -> list[Need]:
    body = from_json(SubscriptionGroupConfig, fastjson.loads(cmd.body or b"{}"))
    return [(group(body.group_name), CREATE)]


def _view_message(cmd: RemotingCommand) -> list[Need]:
    topic = _ext(cmd, "topic")  # 5.x headers name the topic; 4.9's only the offset
    return [(topic_or_group(topic), SUB_GET)] if topic else []


_SPECIAL: dict[int, Callable[[RemotingCommand], list[Need]]] = {
    C.SEND_MESSAGE: _send("topic", "group"),
    C.SEND_MESSAGE_V2: _send("b", "a"),
    C.SEND_BATCH_MESSAGE: _send("b", "a"),
    C.PULL_MESSAGE: _topic_and_group("topic", "consumerGroup", SUB),
    C.QUERY_CONSUMER_OFFSET: _topic_and_group("topic", "consumerGroup", SUB_GET),
    C.UPDATE_CONSUMER_OFFSET: _topic_and_group("topic", "consumerGroup", SUB_UPDATE),
    C.CONSUMER_SEND_MSG_BACK: lambda cmd: [(group(_ext(cmd, "group")), SUB)],
    C.HEART_BEAT: _heartbeat,
    C.UNREGISTER_CLIENT: _unregister,
    C.LOCK_BATCH_MQ: _locks,
    C.UNLOCK_BATCH_MQ: _locks,
    C.END_TRANSACTION: _end_transaction,
    C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: _create_group,
    C.VIEW_MESSAGE_BY_ID: _view_message,
}


#: The extFields a code's needs depend on (codes whose body matters are not listed).
_CACHE_KEYS: dict[int, tuple[str, ...]] = {
    C.SEND_MESSAGE: ("topic", "group"), C.SEND_MESSAGE_V2: ("b", "a"),
    C.SEND_BATCH_MESSAGE: ("b", "a"), C.PULL_MESSAGE: ("topic", "consumerGroup"),
    C.QUERY_CONSUMER_OFFSET: ("topic", "consumerGroup"),
    C.UPDATE_CONSUMER_OFFSET: ("topic", "consumerGroup"), C.CONSUMER_SEND_MSG_BACK: ("group",),
    C.UNREGISTER_CLIENT: ("consumerGroup",), C.END_TRANSACTION: ("topic",),
    C.VIEW_MESSAGE_BY_ID: ("topic",),
    **{code: tuple(key for _, key, _ in fields) for code, (fields, _) in _TABLE.items()},
}


def needs_key(cmd: RemotingCommand) -> tuple[object, ...] | None:
    """What a request's needs depend on, to cache decisions by; None: depends on the body."""
    keys = _CACHE_KEYS.get(cmd.code)
    if keys is None:
        return None if cmd.code in _SPECIAL else (cmd.code,)
    ext = cmd.ext_fields or {}
    return (cmd.code, *[ext.get(k) for k in keys])


def broker_needs(cmd: RemotingCommand, cluster_name: str) -> list[Need]:
    """The (resource, actions) pairs a broker request needs; unknown codes need Cluster Update.

    Raises:
        ProtocolError: the body the check reads (heartbeat, locks, group config) is malformed.
    """
    special = _SPECIAL.get(cmd.code)
    if special is not None:
        return special(cmd)
    spec = _TABLE.get(cmd.code)
    if spec is None:
        return [(cluster(cluster_name), UPDATE)]
    fields, actions = spec
    out: list[Need] = []
    for rtype, key, sep in fields:
        value = _ext(cmd, key)
        for name in (value.split(sep) if sep else [value]):
            name = name.strip()
            if name:
                out.append((topic_or_group(name) if rtype is T else group(name), actions))
    return out or [(cluster(cluster_name), actions)]


def checked_codes() -> frozenset[int]:
    """Every code with its own entry (the others need Cluster Update)."""
    return frozenset(_SPECIAL) | frozenset(_TABLE)

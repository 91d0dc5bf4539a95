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

`NEEDS` is the one table: each code's `Rule` names the extFields its needs are computed from
(and gets only those), or says they come from the body; the decision cache's key
(`needs_key`) is derived from it, so a rule and its cache key cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.auth.model import Action, Resource, ResourcePattern, ResourceType
from engine.protocol import fastjson
from engine.protocol.body.heartbeat import HeartbeatData
from engine.protocol.body.lock import LockBatchRequestBody
from engine.protocol.body.pop import BatchAckMessageRequestBody
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


NeedsOfFields = Callable[[tuple[str, ...]], list[Need]]
NeedsOfBody = Callable[[bytes], list[Need]]


@dataclass(frozen=True, slots=True)
class Rule:
    """What one request code needs, computed from the extFields it `reads` or from its body.

    A `from_fields` function gets the values of `reads` (in that order, "" when absent) and
    nothing else, so `reads` is exactly what its answer depends on: decisions are cached by
    those values (`needs_key`).  A `from_body` answer depends on the body and is not keyed.
    When the answer names no topic or group, `cluster` (if any) is needed on the cluster;
    without it the request only has to be signed.
    """

    reads: tuple[str, ...] = ()
    from_fields: NeedsOfFields | None = None
    from_body: NeedsOfBody | None = None
    cluster: tuple[Action, ...] = ()

    def __post_init__(self) -> None:
        if (self.from_fields is None) == (self.from_body is None):
            raise ValueError("a rule computes its needs from its fields or from its body")

    def needs_of(self, cmd: RemotingCommand) -> list[Need]:
        if self.from_body is not None:
            return self.from_body(cmd.body or b"")
        assert self.from_fields is not None
        ext = cmd.ext_fields or {}
        return self.from_fields(tuple(ext.get(key) or "" for key in self.reads))


_FieldSpec = tuple[ResourceType, str, str]  # resource type, extFields key, list separator


def _named(actions: tuple[Action, ...], *fields: _FieldSpec) -> Rule:
    """Header-driven: each named topic or group needs one of `actions`; none named: the cluster."""
    def needs(values: tuple[str, ...]) -> list[Need]:
        out: list[Need] = []
        for (rtype, _, sep), value in zip(fields, values, strict=True):
            for name in (value.split(sep) if sep else [value]):
                name = name.strip()
                if name:
                    out.append((topic_or_group(name) if rtype is T else group(name), actions))
        return out
    return Rule(tuple(key for _, key, _ in fields), from_fields=needs, cluster=actions)


def _on_cluster(actions: tuple[Action, ...]) -> Rule:
    """Cluster-wide: no resource field, checked against Cluster:<brokerClusterName>."""
    return _named(actions)


def _send(topic_key: str, group_key: str) -> Rule:
    def needs(values: tuple[str, ...]) -> list[Need]:
        topic, grp = values
        if topic.startswith(RETRY_PREFIX):  # a consumer sending back: Sub on its group
            return [(group(grp or topic), SUB)]
        return [(Resource(T, topic), PUB)]
    return Rule((topic_key, group_key), from_fields=needs)


def _topic_and_group(actions: tuple[Action, ...]) -> Rule:
    def needs(values: tuple[str, ...]) -> list[Need]:
        topic, grp = values
        out: list[Need] = []
        if not topic.startswith(RETRY_PREFIX):
            out.append((Resource(T, topic), actions))
        out.append((group(grp), actions))
        return out
    return Rule(("topic", "consumerGroup"), from_fields=needs)


def _heartbeat(body: bytes) -> list[Need]:
    data = from_json(HeartbeatData, fastjson.loads(body or b"{}"))
    out: list[Need] = []
    for consumer in data.consumer_data_set:
        out.append((group(consumer.group_name), SUB))
        for sub in consumer.subscription_data_set:
            if not sub.topic.startswith(RETRY_PREFIX):
                out.append((Resource(T, sub.topic), SUB))
    return out


def _locks(body: bytes) -> list[Need]:
    data = from_json(LockBatchRequestBody, fastjson.loads(body or b"{}"))
    out: list[Need] = [(group(data.consumer_group), SUB)]
    for mq in data.mq_set:
        if not mq.topic.startswith(RETRY_PREFIX):
            out.append((Resource(T, mq.topic), SUB))
    return out


def _batch_ack(body: bytes) -> list[Need]:
    """5.x BATCH_ACK_MESSAGE: Sub on each acked topic and its group (as ACK_MESSAGE)."""
    data = from_json(BatchAckMessageRequestBody, fastjson.loads(body or b"{}"))
    out: list[Need] = []
    for ack in data.acks:
        out.append((group(ack.consumer_group), SUB))
        if not ack.topic.startswith(RETRY_PREFIX):
            out.append((Resource(T, ack.topic), SUB))
    return out


def _create_group(body: bytes) -> list[Need]:
    config = from_json(SubscriptionGroupConfig, fastjson.loads(body or b"{}"))
    return [(group(config.group_name), CREATE)]


def _group_if_named(values: tuple[str, ...]) -> list[Need]:
    (name,) = values
    return [(group(name), SUB)] if name else []


def _pub_if_named(values: tuple[str, ...]) -> list[Need]:
    (topic,) = values  # 5.x clients send it; 4.9 clients do not (then: signed only)
    return [(Resource(T, topic), PUB)] if topic else []


def _view_if_named(values: tuple[str, ...]) -> list[Need]:
    (topic,) = values  # 5.x headers name the topic; 4.9's only the offset
    return [(topic_or_group(topic), SUB_GET)] if topic else []


#: The needs table: every code the broker checks by its own rule (others: Cluster Update).
NEEDS: dict[int, Rule] = {
    C.SEND_MESSAGE: _send("topic", "group"),
    C.SEND_MESSAGE_V2: _send("b", "a"),
    C.SEND_BATCH_MESSAGE: _send("b", "a"),
    C.PULL_MESSAGE: _topic_and_group(SUB),
    C.QUERY_CONSUMER_OFFSET: _topic_and_group(SUB_GET),
    C.UPDATE_CONSUMER_OFFSET: _topic_and_group(SUB_UPDATE),
    C.CONSUMER_SEND_MSG_BACK: Rule(("group",), from_fields=lambda v: [(group(v[0]), SUB)]),
    C.HEART_BEAT: Rule(from_body=_heartbeat),
    C.POP_MESSAGE: _topic_and_group(SUB),  # 5.x POP: 5.3 annotates each header with Sub
    C.ACK_MESSAGE: _topic_and_group(SUB),
    C.BATCH_ACK_MESSAGE: Rule(from_body=_batch_ack),
    C.CHANGE_MESSAGE_INVISIBLETIME: _topic_and_group(SUB),
    C.PEEK_MESSAGE: _topic_and_group(SUB),
    C.NOTIFICATION: _topic_and_group(SUB),
    C.POLLING_INFO: _topic_and_group(GET),
    C.UNREGISTER_CLIENT: Rule(("consumerGroup",), from_fields=_group_if_named),
    C.LOCK_BATCH_MQ: Rule(from_body=_locks),
    C.UNLOCK_BATCH_MQ: Rule(from_body=_locks),
    C.END_TRANSACTION: Rule(("topic",), from_fields=_pub_if_named),
    C.RECALL_MESSAGE: _named(PUB, (T, "topic", "")),  # 5.3: Pub on the topic
    C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: Rule(from_body=_create_group),
    C.VIEW_MESSAGE_BY_ID: Rule(("topic",), from_fields=_view_if_named),
    C.QUERY_MESSAGE: _named(SUB_GET, (T, "topic", "")),
    C.SEARCH_OFFSET_BY_TIMESTAMP: _named(SUB_GET, (T, "topic", "")),
    C.GET_MAX_OFFSET: _named(SUB_GET, (T, "topic", "")),
    C.GET_MIN_OFFSET: _named(SUB_GET, (T, "topic", "")),
    C.GET_EARLIEST_MSG_STORETIME: _named(SUB_GET, (T, "topic", "")),
    C.GET_CONSUMER_LIST_BY_GROUP: _named(SUB_GET, (G, "consumerGroup", "")),
    C.CHECK_CLIENT_CONFIG: _named(SUB, (G, "group", "")),
    C.UPDATE_AND_CREATE_TOPIC: _named(CREATE, (T, "topic", "")),
    C.DELETE_TOPIC_IN_BROKER: _named(DELETE, (T, "topic", "")),
    C.DELETE_SUBSCRIPTIONGROUP: _named(DELETE, (G, "groupName", "")),
    C.GET_TOPIC_STATS_INFO: _named(GET, (T, "topic", "")),
    C.GET_TOPIC_CONFIG: _named(GET, (T, "topic", "")),
    C.GET_SUBSCRIPTIONGROUP_CONFIG: _named(GET, (G, "group", "")),
    C.GET_CONSUMER_CONNECTION_LIST: _named(GET, (G, "consumerGroup", "")),
    C.GET_CONSUME_STATS: _named(GET, (G, "consumerGroup", ""), (T, "topic", "")),
    C.INVOKE_BROKER_TO_RESET_OFFSET: _named(UPDATE, (G, "group", ""), (T, "topic", "")),
    C.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: _named(GET, (T, "topic", ""), (G, "group", "")),
    C.QUERY_TOPIC_CONSUME_BY_WHO: _named(GET, (T, "topic", "")),
    C.QUERY_CONSUME_TIME_SPAN: _named(GET, (T, "topic", ""), (G, "group", "")),
    C.GET_CONSUMER_RUNNING_INFO: _named(GET, (G, "consumerGroup", "")),
    C.QUERY_CORRECTION_OFFSET: _named(GET, (G, "filterGroups", ","), (G, "compareGroup", ""),
                                      (T, "topic", "")),
    C.CONSUME_MESSAGE_DIRECTLY: _named(SUB, (G, "consumerGroup", ""), (T, "topic", "")),
    C.CLONE_GROUP_OFFSET: _named(UPDATE, (G, "destGroup", ""), (T, "topic", "")),
    C.QUERY_CONSUME_QUEUE: _named(GET, (T, "topic", ""), (G, "consumerGroup", "")),
    C.GET_ALL_TOPIC_CONFIG: _on_cluster(GET_LIST),
    C.GET_ALL_CONSUMER_OFFSET: _on_cluster(GET_LIST),
    C.GET_ALL_DELAY_OFFSET: _on_cluster(GET_LIST),
    C.GET_TIMER_CHECK_POINT: _on_cluster(GET_LIST),
    C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: _on_cluster(GET_LIST),
    C.UPDATE_BROKER_CONFIG: _on_cluster(UPDATE),
    C.GET_BROKER_CONFIG: _on_cluster(GET),
    C.GET_BROKER_RUNTIME_INFO: _on_cluster(GET),
    C.GET_PRODUCER_CONNECTION_LIST: _on_cluster(GET),
    C.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: _on_cluster(GET),
    C.CLEAN_EXPIRED_CONSUMEQUEUE: _on_cluster(UPDATE),
    C.VIEW_BROKER_STATS_DATA: _on_cluster(GET),
    C.CLEAN_UNUSED_TOPIC: _on_cluster(UPDATE),
    C.GET_BROKER_CONSUME_STATS: _on_cluster(GET),
    C.GET_ALL_PRODUCER_INFO: _on_cluster(GET),
    C.DELETE_EXPIRED_COMMITLOG: _on_cluster(UPDATE),
    C.GET_BROKER_HA_STATUS: _on_cluster(GET),
    C.NOTIFY_BROKER_ROLE_CHANGED: _on_cluster(UPDATE),
    C.HA_FENCE_WRITES: _on_cluster(UPDATE),
    C.AUTH_CREATE_USER: _on_cluster(UPDATE),
    C.AUTH_UPDATE_USER: _on_cluster(UPDATE),
    C.AUTH_DELETE_USER: _on_cluster(UPDATE),
    C.AUTH_GET_USER: _on_cluster(GET),
    C.AUTH_LIST_USER: _on_cluster(GET),
    C.AUTH_CREATE_ACL: _on_cluster(UPDATE),
    C.AUTH_UPDATE_ACL: _on_cluster(UPDATE),
    C.AUTH_DELETE_ACL: _on_cluster(UPDATE),
    C.AUTH_GET_ACL: _on_cluster(GET),
    C.AUTH_LIST_ACL: _on_cluster(GET),
    C.UPDATE_AND_CREATE_ACL_CONFIG: _on_cluster(UPDATE),
    C.DELETE_ACL_CONFIG: _on_cluster(UPDATE),
    C.GET_BROKER_CLUSTER_ACL_INFO: _on_cluster(GET),
    C.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: _on_cluster(UPDATE),
    C.GET_BROKER_CLUSTER_ACL_CONFIG: _on_cluster(GET),
}


def needs_key(cmd: RemotingCommand) -> tuple[object, ...] | None:
    """What a request's needs depend on, to cache decisions by; None: depends on the body.

    Derived from `NEEDS`: the code and the values of the extFields its rule reads.
    """
    rule = NEEDS.get(cmd.code)
    if rule is None:
        return (cmd.code,)
    if rule.from_body is not None:
        return None
    ext = cmd.ext_fields or {}
    return (cmd.code, *[ext.get(key) or "" for key in rule.reads])


def broker_needs(cmd: RemotingCommand, cluster_name: str) -> list[Need]:
    """The (resource, actions) pairs a broker request needs; unknown codes need Cluster Update.

    Raises:
        ProtocolError: the body the check reads (heartbeat, locks, group config) is malformed.
    """
    rule = NEEDS.get(cmd.code)
    if rule is None:
        return [(cluster(cluster_name), UPDATE)]
    out = rule.needs_of(cmd)
    if not out and rule.cluster:
        return [(cluster(cluster_name), rule.cluster)]
    return out

"""Which messages a subscription wants: tag filters, and SQL92 on properties when enabled.

How this works: a TAG subscription filters on the consume-queue tags code alone (the client
re-checks the exact tag).  A SQL92 subscription (enablePropertyFilter=true) passes every
consume-queue entry and is decided on the record itself, against all of its properties
(user and system ones such as TAGS and KEYS), as 4.9.7's `ExpressionMessageFilter` does
without the consume-queue extension.  Expressions are compiled strictly: text after a
complete expression is an error here, where 4.9.7 silently ignores it (so `a CONTAINS 'x'`,
a 5.x operator, would never match) — an operator learns of the mistake at subscribe time.
"""

from __future__ import annotations

from engine.broker.errors import Refused
from engine.filter import FilterError, Sql92Filter, compile_sql92
from engine.protocol.body.heartbeat import ExpressionType, SubscriptionData
from engine.protocol.codes import ResponseCode
from engine.protocol.errors import ProtocolError
from engine.protocol.message import decode_record
from engine.store.message_filter import MessageFilter, TagsFilter


class SqlMessageFilter:
    """A compiled SQL92 expression as the store's read-path filter."""

    def __init__(self, expression: Sql92Filter) -> None:
        self.expression = expression

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return True

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        try:
            props = decode_record(record).properties()
        except ProtocolError:
            return False
        return self.expression.matches(props)


def compile_subscription(sub: SubscriptionData, enable_property_filter: bool) -> Sql92Filter:
    """The compiled SQL92 expression of a subscription.

    Raises:
        Refused: SYSTEM_ERROR when the broker does not filter by properties,
            SUBSCRIPTION_PARSE_FAILED when the expression does not parse.
    """
    if not enable_property_filter:
        raise Refused(ResponseCode.SYSTEM_ERROR,
                            "The broker does not support consumer to filter message by "
                            f"{sub.expression_type.name}; set enablePropertyFilter=true in "
                            "broker.conf to use SQL92 subscriptions")
    try:
        return compile_sql92(sub.sub_string, strict=True)
    except FilterError as exc:
        raise Refused(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                            f"SQL92 subscription of topic {sub.topic} does not parse: {exc}; "
                            f"expression: {sub.sub_string}") from None


def message_filter(sub: SubscriptionData, enable_property_filter: bool) -> MessageFilter | None:
    """The read-path filter of a subscription; None when it takes every message.

    Raises:
        Refused: see `compile_subscription`.
    """
    if sub.expression_type is ExpressionType.SQL92:
        return SqlMessageFilter(compile_subscription(sub, enable_property_filter))
    return None if sub.is_sub_all else TagsFilter(sub.tags_set)

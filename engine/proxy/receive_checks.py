"""What a ReceiveMessage asks for, checked and settled as 5.3.3 does, before any broker is asked.

How this works (5.3.3 `ReceiveMessageActivity`, `GrpcValidator.validateInvisibleTime`,
`FilterAPI.build`, `ConsumerProcessor.popMessage`), sans-IO:

* The long-polling time is the request's `long_polling_timeout`; without one, the time left
  on the call's deadline minus half the client's request timeout (what a Java client, which
  sends none, gets: its deadline is the await time plus the request timeout).  It is raised
  to grpcClientConsumerMinLongPollingTimeoutMillis (5 s) and lowered to
  grpcClientConsumerMaxLongPollingTimeoutMillis (20 s); when it is more than the time left,
  it becomes the time left, unless that is under the minimum: then the receive is refused
  at once, ILLEGAL_POLLING_TIME (BAD_REQUEST for clients before 5.0.3, as 5.3.3 compares
  versions), whatever the queues hold.
* The broker is asked to poll that long, but at most the time left minus
  longPollingReserveTimeInMillis, so its answer is written before the deadline (5.3.3 reads
  the key and uses it nowhere; its broker answers 50 ms early).
* The invisible time is the request's (none is 0), within [minInvisibleTimeMillsForRecv,
  maxInvisibleTimeMills]; an auto-renewed receive gets defaultInvisibleTimeMills.
* A batch above 32 is lowered to 32; 0 stays 0 (the broker finds nothing and polls);
  a negative one is refused.
* A filter: TAG (or unspecified) empty or `*` takes everything, `||` alone is refused;
  an SQL92 expression must not be empty (the broker compiles it).
"""

from __future__ import annotations

from engine.protocol.body.heartbeat import SUB_ALL, ExpressionType, SubscriptionData
from engine.proxy.config import ProxyConfig
from engine.proxy.status import ProxyError
from engine.proxy.v2 import definition_pb2 as pb

#: 5.3.3 `ProxyUtils.MAX_MSG_NUMS_FOR_POP_REQUEST`
MAX_BATCH = 32
#: Clients from this version on are answered ILLEGAL_POLLING_TIME, older ones BAD_REQUEST.
ILLEGAL_POLLING_TIME_SINCE = "5.0.3"
NOT_ENOUGH_TIME = ("The deadline time remaining is not enough for polling, please check "
                   "network condition")


def polling_ms(config: ProxyConfig, requested_ms: int | None, remaining_ms: int,
               request_timeout_ms: int, client_version: str) -> int:
    """How long the receive may poll (5.3.3's rule, above).

    Args:
        requested_ms: the request's long_polling_timeout; None when it has none.
        remaining_ms: the time left on the call's deadline when it came in.
        request_timeout_ms: the client's request timeout (its settings).
        client_version: the x-mq-client-version header.

    Raises:
        ProxyError: ILLEGAL_POLLING_TIME or BAD_REQUEST, not enough time left.
    """
    low = config.grpc_client_consumer_min_long_polling_timeout_millis
    high = config.grpc_client_consumer_max_long_polling_timeout_millis
    polling = requested_ms if requested_ms is not None else remaining_ms - request_timeout_ms // 2
    polling = min(max(polling, low), high)
    if polling > remaining_ms:
        if remaining_ms < low:
            # Java's String.compareTo, as 5.3.3 compares versions (so "" is before 5.0.3)
            old = client_version < ILLEGAL_POLLING_TIME_SINCE
            raise ProxyError(pb.BAD_REQUEST if old else pb.ILLEGAL_POLLING_TIME,
                             NOT_ENOUGH_TIME)
        polling = remaining_ms
    return polling


def broker_polling_ms(config: ProxyConfig, polling: int, remaining_ms: int) -> int:
    """How long the broker is asked to hold the receive: its answer must beat the deadline."""
    return max(min(polling, remaining_ms - config.long_polling_reserve_time_in_millis), 0)


def invisible_ms(config: ProxyConfig, auto_renew: bool, requested_ms: int) -> int:
    """The receive's invisible time.

    Raises:
        ProxyError: ILLEGAL_INVISIBLE_TIME.
    """
    if auto_renew:
        return config.default_invisible_time_mills
    check_invisible(config, requested_ms, config.min_invisible_time_mills_for_recv)
    return requested_ms


def check_invisible(config: ProxyConfig, value_ms: int, least_ms: int = 0) -> None:
    """An invisible time of ReceiveMessage (at least minInvisibleTimeMillsForRecv) or of
    ChangeInvisibleDuration (at least 0), at most maxInvisibleTimeMills (when positive).

    Raises:
        ProxyError: ILLEGAL_INVISIBLE_TIME, with 5.3.3's words.
    """
    if value_ms < least_ms:
        raise ProxyError(pb.ILLEGAL_INVISIBLE_TIME,
                         f"the invisibleTime is too small. min is {least_ms}")
    most = config.max_invisible_time_mills
    if 0 < most < value_ms:
        raise ProxyError(pb.ILLEGAL_INVISIBLE_TIME,
                         f"the invisibleTime is too large. max is {most}")


def batch_size(requested: int) -> int:
    """The messages asked of the broker.

    Raises:
        ProxyError: INTERNAL_SERVER_ERROR for a negative size (5.3.3 fails it in its broker).
    """
    if requested < 0:
        raise ProxyError(pb.INTERNAL_SERVER_ERROR, f"the batch size {requested} is negative")
    return min(requested, MAX_BATCH)


def receive_filter(topic: str, expression: pb.FilterExpression) -> SubscriptionData:
    """The subscription of one receive (5.3.3 `FilterAPI.build`).

    Raises:
        ProxyError: ILLEGAL_FILTER_EXPRESSION.
    """
    text = expression.expression
    if expression.type == pb.SQL:
        if not text:
            raise ProxyError(pb.ILLEGAL_FILTER_EXPRESSION, "Expression can't be null! SQL92")
        return SubscriptionData.build(topic, text, ExpressionType.SQL92)
    # Java's split drops trailing empty strings: "||" (or "||||") leaves no part at all
    if text and text != SUB_ALL and not any(text.split("||")):
        raise ProxyError(pb.ILLEGAL_FILTER_EXPRESSION, "subString split error")
    return SubscriptionData.build(topic, text, ExpressionType.TAG)

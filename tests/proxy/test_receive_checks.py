"""5.3.3's ReceiveMessage rules as pure functions (engine/proxy/receive_checks.py)."""

from __future__ import annotations

import pytest

from engine.protocol.body.heartbeat import ExpressionType
from engine.proxy import receive_checks as checks
from engine.proxy.config import ProxyConfig
from engine.proxy.status import ProxyError
from engine.proxy.v2 import definition_pb2 as pb

CONFIG = ProxyConfig()  # 5 s to 20 s, reserve 100 ms, invisible 10 s to 12 h


@pytest.mark.parametrize(("requested", "left", "request_timeout", "polling"), [
    (5000, 8000, 3000, 5000),  # the request's time
    (None, 8000, 3000, 6500),  # none: the time left less half the request timeout
    (None, 13000, 3000, 11500),  # the Java client's await 10 s: 1.5 s after it
    (0, 10000, 3000, 5000),  # raised to the minimum
    (60000, 40000, 3000, 20000),  # lowered to the maximum
    (20000, 6000, 3000, 6000),  # more than the time left: the time left
    (None, 5500, 3000, 5000),  # 4000 raised to 5000, still within the time left
])
def test_polling_time(requested: int | None, left: int, request_timeout: int,
                      polling: int) -> None:
    assert checks.polling_ms(CONFIG, requested, left, request_timeout, "5.1.2") == polling


@pytest.mark.parametrize(("version", "code"), [
    ("5.1.2", pb.ILLEGAL_POLLING_TIME), ("5.0.3", pb.ILLEGAL_POLLING_TIME),
    ("5.0.2", pb.BAD_REQUEST), ("", pb.BAD_REQUEST),
    ("10.0.0", pb.BAD_REQUEST),  # compared as strings, as 5.3.3 does
])
def test_too_little_time_left(version: str, code: int) -> None:
    with pytest.raises(ProxyError) as info:
        checks.polling_ms(CONFIG, 0, 4999, 3000, version)
    assert (info.value.code, info.value.message) == (code, checks.NOT_ENOUGH_TIME)


def test_the_broker_polls_at_most_the_time_left_less_the_reserve() -> None:
    assert checks.broker_polling_ms(CONFIG, 5000, 8000) == 5000
    assert checks.broker_polling_ms(CONFIG, 6000, 6000) == 5900
    assert checks.broker_polling_ms(CONFIG, 6000, 50) == 0


def test_invisible_time() -> None:
    assert checks.invisible_ms(CONFIG, True, 0) == 60_000  # auto-renewed: the default
    assert checks.invisible_ms(CONFIG, False, 10_000) == 10_000
    for value, words in ((9_999, "too small. min is 10000"),
                         (12 * 3600_000 + 1, "too large. max is 43200000")):
        with pytest.raises(ProxyError) as info:
            checks.invisible_ms(CONFIG, False, value)
        assert (info.value.code, info.value.message) == (pb.ILLEGAL_INVISIBLE_TIME,
                                                         f"the invisibleTime is {words}")
    checks.check_invisible(CONFIG, 0)  # ChangeInvisibleDuration: 0 is allowed


def test_batch_size() -> None:
    assert [checks.batch_size(n) for n in (0, 1, 32, 33, 1_000_000)] == [0, 1, 32, 32, 32]
    with pytest.raises(ProxyError):
        checks.batch_size(-1)


@pytest.mark.parametrize(("kind", "text", "tags"), [
    (pb.TAG, "", None), (pb.TAG, "*", None), (pb.FILTER_TYPE_UNSPECIFIED, "", None),
    (pb.TAG, "a||b", {"a", "b"}), (pb.TAG, "|||", {"|"}), (pb.TAG, "a||", {"a"}),
])
def test_tag_filters(kind: int, text: str, tags: set[str] | None) -> None:
    sub = checks.receive_filter("T", pb.FilterExpression(type=kind, expression=text))
    assert sub.expression_type is ExpressionType.TAG
    assert (sub.is_sub_all if tags is None else set(sub.tags_set) == tags)


@pytest.mark.parametrize(("kind", "text", "words"), [
    (pb.TAG, "||", "subString split error"), (pb.TAG, "||||", "subString split error"),
    (pb.SQL, "", "Expression can't be null! SQL92"),
])
def test_refused_filters(kind: int, text: str, words: str) -> None:
    with pytest.raises(ProxyError) as info:
        checks.receive_filter("T", pb.FilterExpression(type=kind, expression=text))
    assert (info.value.code, info.value.message) == (pb.ILLEGAL_FILTER_EXPRESSION, words)


def test_sql_filter_is_kept_whole() -> None:
    sub = checks.receive_filter("T", pb.FilterExpression(type=pb.SQL, expression="a > 1"))
    assert (sub.expression_type, sub.sub_string) == (ExpressionType.SQL92, "a > 1")

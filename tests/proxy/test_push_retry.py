"""The official Python and Node.js PushConsumers' retries and dead letters through our proxy
(tests/proxy/push_retry.py; test_apache5_push.py runs the same cases against Apache 5.3.3 too):
a NORMAL message failed twice comes back with its delivery attempt raised and succeeds the third
time; one that always fails, or whose listener throws, is delivered max-attempts times and is
then in %DLQ%<group>; a FIFO message group waits behind its failing first message, retried by
the client, until that one is in the DLQ (or succeeds).

The Node.js client (1.0.8) reads no customized backoff (the one every group's settings carry,
as 5.3.3's): its NORMAL nacks are for 0 s and a FIFO message gets one attempt, forwarded to the
DLQ when it fails; the same against 5.3.3.

Long polls of 1 s, a 1 s backoff and a 200 ms revive here (CONSUMER_PROXY, QUICK_REVIVE), so
a nacked message comes back in a second or two: a redelivery waits for the consumer's pending
long poll to end, as on 5.3.3 (a held pop is not woken for the V1 pop retry topic).  A case is
mostly waiting (backoffs, long polls), so one client's five cases run side by side on one
proxy, each with its own topic, group and PushConsumer; each case's expectation is checked and
every one that fails is reported.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from engine.namesrv.controller import NamesrvController
from tests.proxy.conftest import Stack, running_stack
from tests.proxy.differential import topic_creator
from tests.proxy.nodejs import NodeClient
from tests.proxy.push_retry import (
    DEAD,
    FIFO,
    FIFO_RETRY,
    RETRY,
    THROWN,
    Case,
    Driver,
    node_client_driver,
    python_client,
    run_case,
)
from tests.proxy.test_simple_consumer import CONSUMER_PROXY, QUICK_REVIVE

pytestmark = pytest.mark.timeout(300)


#: A backoff of 1 s after every failed attempt (the default levels' first; they go on 5 s,
#: 10 s, ...), so a nacked message comes back within a second or two.
PUSH_PROXY = dataclasses.replace(CONSUMER_PROXY, message_delay_level="1s")


@pytest.fixture
async def push_stack(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Stack]:
    async with running_stack(tmp_path, namesrv, PUSH_PROXY, **QUICK_REVIVE) as stack:
        yield stack


@pytest.fixture(params=["python", "node"])
def client(request: pytest.FixtureRequest) -> tuple[str, Driver]:
    if request.param == "python":
        return "python", python_client
    node: NodeClient = request.getfixturevalue("node_client")
    return "node", node_client_driver(node)


def _dead_one(dead: dict[str, Any], body: bytes, keys: str) -> None:
    assert dead["topic"] == f"%DLQ%PushGroup{dead['topic'].split('PushGroup')[1]}"
    assert dead["body"] == body
    props = dead["properties"]
    assert (props["KEYS"], props["TAGS"], props["k"]) == (keys, "TagA", "v")
    assert props["ORIGIN_MESSAGE_ID"] and props["UNIQ_KEY"]


def failed_twice_succeeds_the_third_time(seen: dict[str, Any], client: str) -> None:
    assert seen["deliveries"] == [(0, "poison", 1, "FAILURE", False),
                                  (0, "poison", 2, "FAILURE", False),
                                  (0, "poison", 3, "SUCCESS", False)]
    assert seen["dead"] == []


def always_failing_goes_to_the_dlq_after_max_attempts(seen: dict[str, Any], client: str,
                                                      result: str = "FAILURE") -> None:
    assert seen["deliveries"] == [(0, "poison", 1, result, False),
                                  (0, "poison", 2, result, False)]
    (dead,) = seen["dead"]
    _dead_one(dead, b"poison", "Key0")


def always_throwing_goes_to_the_dlq_after_max_attempts(seen: dict[str, Any],
                                                       client: str) -> None:
    always_failing_goes_to_the_dlq_after_max_attempts(seen, client, "THROWN")


def fifo_group_waits_behind_its_failing_message_until_the_dlq(seen: dict[str, Any],
                                                              client: str) -> None:
    # the Python client retries a FIFO message itself (reporting the broker's attempt each
    # time); the Node.js client does not (no customized backoff): one attempt each
    tries = 2 if client == "python" else 1
    assert seen["deliveries"] == [(0, "first", 1, "FAILURE", True)] * tries + [
        (1, "second", 1, "FAILURE", True)] * tries
    first, second = seen["dead"]
    _dead_one(first, b"first", "Key0")
    _dead_one(second, b"second", "Key1")
    assert first["reconsume"] == second["reconsume"] == 1


def fifo_message_retried_by_the_client_succeeds_before_the_next(seen: dict[str, Any],
                                                                client: str) -> None:
    if client == "python":
        assert seen["deliveries"] == [
            (0, "first", 1, "FAILURE", True), (0, "first", 1, "FAILURE", True),
            (0, "first", 1, "SUCCESS", True), (1, "second", 1, "FAILURE", True),
            (1, "second", 1, "FAILURE", True), (1, "second", 1, "SUCCESS", True)]
        assert seen["dead"] == []
    else:  # one attempt each, then the DLQ
        assert seen["deliveries"] == [(0, "first", 1, "FAILURE", True),
                                      (1, "second", 1, "FAILURE", True)]
        assert [dead["body"] for dead in seen["dead"]] == [b"first", b"second"]


#: Each case and what the client must have seen in it.
EXPECTED: dict[Case, Callable[[dict[str, Any], str], None]] = {
    RETRY: failed_twice_succeeds_the_third_time,
    DEAD: always_failing_goes_to_the_dlq_after_max_attempts,
    THROWN: always_throwing_goes_to_the_dlq_after_max_attempts,
    FIFO: fifo_group_waits_behind_its_failing_message_until_the_dlq,
    FIFO_RETRY: fifo_message_retried_by_the_client_succeeds_before_the_next,
}


async def test_every_case_side_by_side(push_stack: Stack, client: tuple[str, Driver]) -> None:
    name, driver = client
    broker = push_stack.broker.addr
    runs = await asyncio.gather(*(
        run_case(push_stack.endpoint, broker, topic_creator(broker), driver, case)
        for case in EXPECTED))
    wrong = {}
    for expected, (seen, _) in zip(EXPECTED.values(), runs, strict=True):
        try:
            expected(seen, name)
        except AssertionError as error:
            wrong[expected.__name__] = (seen, str(error))
    assert not wrong, wrong

"""The lean SendMessage path (lean_send.py) against the full one (producer.py): the same
messages through both are stored alike and answered alike; refused alike."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from engine.namesrv.controller import NamesrvController
from engine.proxy import lean_send, producer
from engine.proxy.caller import CallContext, call_context
from engine.proxy.core import ProxyCore
from engine.proxy.status import ProxyError
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from tests.proxy.conftest import TEST_PROXY, Stack, running_stack, stored

HEADERS = (("x-mq-client-id", "lean-client-1"), ("x-mq-language", "PYTHON"),
           ("x-mq-client-version", "5.1.2"), ("x-mq-protocol", "v2"))
SendPath = Callable[[ProxyCore, CallContext, spb.SendMessageRequest],
                    Awaitable[spb.SendMessageResponse]]
PATHS: dict[str, SendPath] = {"full": producer.send_message, "lean": lean_send.send_message}
#: Set per send: the id.
VARYING = {"UNIQ_KEY"}
_ids = iter(range(1, 1 << 30))
IN_AN_HOUR_MS = int(time.time() * 1000) + 3600_000
#: The lean path needs a fresh cached route: the suite's 1 s refresh can pass on a busy machine
#: between the send that caches it and the sends compared.
LEAN_PROXY = dataclasses.replace(TEST_PROXY, topic_route_service_cache_refresh_seconds=600)


@pytest.fixture
async def stack(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Stack]:
    async with running_stack(tmp_path, namesrv, LEAN_PROXY) as s:
        yield s


def message(topic: str, body: bytes = b"lean", **system: object) -> pb.Message:
    msg = pb.Message(topic=pb.Resource(name=topic), body=body)
    msg.system_properties.message_id = f"01{next(_ids):030X}"
    msg.system_properties.born_timestamp.FromMilliseconds(1_700_000_000_000)
    for key, value in system.items():
        if key == "keys":
            msg.system_properties.keys.extend(value)  # type: ignore[call-overload]
        elif key == "props":
            msg.user_properties.update(value)  # type: ignore[call-overload]
        elif key == "delivery_ms":
            msg.system_properties.delivery_timestamp.FromMilliseconds(value)  # type: ignore
        else:
            setattr(msg.system_properties, key, value)
    return msg


async def both(stack: Stack, make: Callable[[], pb.Message]
               ) -> dict[str, tuple[spb.SendMessageResponse, pb.Message]]:
    ctx = call_context(HEADERS, "ipv4:127.0.0.1:4242")
    core = stack.proxy.core
    await producer.send_message(core, ctx, spb.SendMessageRequest(messages=[make()]))  # caches
    topic = make().topic.name
    assert core.gateway.cached_write_queues(topic) is not None
    out = {}
    for name, path in PATHS.items():
        msg = make()
        out[name] = (await path(core, ctx, spb.SendMessageRequest(messages=[msg])), msg)
    return out


@pytest.mark.parametrize("topic, kind, fields", [
    ("LeanNormal", None, {}),
    ("LeanNormal", None, {"tag": "TagA", "keys": ["k1", "k2"], "props": {"a": "1", "b": "2"},
                          "trace_context": "00-abc-def-01"}),
    ("LeanFifo", "FIFO", {"message_group": "group-7", "tag": "TagF"}),
])
async def test_the_lean_path_stores_and_answers_as_the_full_path(
        stack: Stack, topic: str, kind: str | None, fields: dict[str, object]) -> None:
    await stack.create_topic(topic, message_type=kind)
    sent = await both(stack, lambda: message(topic, **fields))
    records = {}
    for name, (response, msg) in sent.items():
        assert response.status.code == pb.OK, response.status.message
        (entry,) = response.entries
        assert entry.status.code == pb.OK
        assert entry.message_id == msg.system_properties.message_id
        records[name] = await stored(stack, topic, entry.message_id)
        assert records[name].queue_offset == entry.offset
    full, lean = records["full"], records["lean"]
    assert lean.body == full.body
    assert lean.sysflag == full.sysflag
    assert lean.born_host == full.born_host and lean.reconsume_times == full.reconsume_times
    assert lean.flag == full.flag
    if fields.get("message_group"):
        assert lean.queue_id == full.queue_id  # the group's queue either way
    strip = lambda props: {k: v for k, v in props.items() if k not in VARYING}  # noqa: E731
    assert strip(lean.properties()) == strip(full.properties())
    assert sent["lean"][0].status == sent["full"][0].status


async def test_a_delay_message_is_answered_alike(stack: Stack) -> None:
    await stack.create_topic("LeanDelay", message_type="DELAY")
    sent = await both(stack, lambda: message("LeanDelay", delivery_ms=IN_AN_HOUR_MS))
    for response, msg in sent.values():
        assert response.status.code == pb.OK
        assert [e.message_id for e in response.entries] == [msg.system_properties.message_id]
    (full,), (lean,) = (sent[p][0].entries for p in ("full", "lean"))
    assert bool(lean.recall_handle) == bool(full.recall_handle)  # a timer's recall handle


@pytest.mark.parametrize("topic, kind, fields, code", [
    ("LeanRefused", None, {"tag": "a|b"}, pb.ILLEGAL_MESSAGE_TAG),
    ("LeanRefused", None, {"props": {"UNIQ_KEY": "x"}}, pb.ILLEGAL_MESSAGE_PROPERTY_KEY),
    ("LeanRefused", None, {"message_group": "g"}, pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
    ("LeanRefused", None, {"keys": [" "]}, pb.ILLEGAL_MESSAGE_KEY),
])
async def test_the_lean_path_refuses_as_the_full_path(
        stack: Stack, topic: str, kind: str | None, fields: dict[str, object],
        code: int) -> None:
    await stack.create_topic(topic, message_type=kind)
    ctx = call_context(HEADERS, "ipv4:127.0.0.1:4242")
    core = stack.proxy.core
    await producer.send_message(core, ctx, spb.SendMessageRequest(messages=[message(topic)]))
    errors = {}
    for name, path in PATHS.items():
        with pytest.raises(ProxyError) as caught:
            await path(core, ctx, spb.SendMessageRequest(messages=[message(topic, **fields)]))
        errors[name] = (caught.value.code, caught.value.message)
    assert errors["lean"] == errors["full"]
    assert errors["lean"][0] == code
    empty = {}
    for name, path in PATHS.items():
        with pytest.raises(ProxyError) as caught:
            await path(core, ctx, spb.SendMessageRequest(messages=[message(topic, b"")]))
        empty[name] = (caught.value.code, caught.value.message)
    assert empty["lean"] == empty["full"] and empty["lean"][0] == pb.MESSAGE_BODY_EMPTY

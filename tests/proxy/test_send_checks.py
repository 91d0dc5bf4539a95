"""SendMessage at and beyond 5.3.3's limits, through raw stubs: every answer as Apache 5.3.3's
(`send_cases.py` holds the requests and Apache's answers), bodies of exactly maxMessageSize
stored for each message type, and no status message longer than the cap."""

from __future__ import annotations

import unicodedata
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.namesrv.controller import NamesrvController
from engine.proxy.status import MAX_MESSAGE_LENGTH, status
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.proxy.validate import has_control, is_blank, java_length, split_namespace
from tests.proxy.conftest import Stack, running_stack, stored
from tests.proxy.send_cases import (
    CASES,
    CHANNEL_OPTIONS,
    HEADERS,
    MIB4,
    TOPICS,
    answers,
    expected,
    message,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def stack(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[Stack]:
    """Commit-log segments that hold a 4 MiB message."""
    async with running_stack(tmp_path, namesrv,
                             mapped_file_size_commit_log=16 * 1024 * 1024) as s:
        yield s


@pytest.fixture
async def stub(stack: Stack) -> AsyncIterator[service_pb2_grpc.MessagingServiceStub]:
    for topic, kind in TOPICS.items():
        await stack.create_topic(topic, 4, kind)
    async with grpc.aio.insecure_channel(stack.endpoint, options=CHANNEL_OPTIONS) as channel:
        yield service_pb2_grpc.MessagingServiceStub(channel)


async def test_every_case_is_answered_as_apache_5_3_3(
        stub: service_pb2_grpc.MessagingServiceStub) -> None:
    names = list(CASES)
    assert await answers(stub, names) == expected(names)


@pytest.mark.parametrize("topic, extra", [
    ("SdNormal", {}), ("SdFifo", {"message_group": "g"}),
    ("SdDelay", {"delivery_in_ms": 1}), ("SdTxn", {"transaction": True})])
async def test_a_body_of_exactly_max_message_size_is_stored(
        stack: Stack, stub: service_pb2_grpc.MessagingServiceStub, topic: str,
        extra: dict[str, object]) -> None:
    msg = message(topic, b"b" * MIB4, props={"k": "v" * (16 * 1024 - 1)}, **extra)  # type: ignore[arg-type]
    sent = await stub.SendMessage(spb.SendMessageRequest(messages=[msg]), metadata=HEADERS,
                                  timeout=30)
    assert sent.status.code == pb.OK, sent.status
    if topic == "SdTxn":
        done = await stub.EndTransaction(spb.EndTransactionRequest(
            topic=pb.Resource(name=topic), message_id=msg.system_properties.message_id,
            transaction_id=sent.entries[0].transaction_id, resolution=pb.COMMIT),
            metadata=HEADERS, timeout=30)
        assert done.status.code == pb.OK, done.status
    record = await stored(stack, topic, msg.system_properties.message_id)
    assert len(record.body) == MIB4


def test_status_messages_are_capped() -> None:
    long = status(pb.ILLEGAL_TOPIC, "x" * 1_000_000).message
    assert len(long) == MAX_MESSAGE_LENGTH and long.endswith("...")
    assert status(pb.OK).message == "OK"


def test_java_rules_of_names_and_texts() -> None:
    assert java_length("\U0001F600") == 2 and java_length("ab") == 2
    assert is_blank("") and is_blank(" \t\x1c") and not is_blank("\xa0") and not is_blank("a")
    assert has_control("\t") and has_control("\x7f") and has_control("\x9f")
    assert not has_control("\xa0") and not has_control("é")


def _java_whitespace(c: str) -> bool:  # Character.isWhitespace, one character at a time
    return c in "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f" or (
        unicodedata.category(c) in ("Zs", "Zl", "Zp") and c not in "\xa0\u2007\u202f")


_TEXTS = st.text(st.one_of(st.characters(max_codepoint=0xFF), st.characters(),
                           st.sampled_from(" \t\x1c\xa0\u2007\u2028\u3000\x85")))


@given(_TEXTS)
def test_text_rules_match_java_character_by_character(text: str) -> None:
    # validate.py takes a shortcut for ASCII texts; the answers are those of the rules
    # applied to each character, for any text
    assert is_blank(text) == all(_java_whitespace(c) for c in text)
    assert has_control(text) == any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text)
    assert java_length(text) == len(text.encode("utf-16-le")) // 2


def test_namespaces_split_as_5_3_3() -> None:
    assert split_namespace("Orders") == ("", "Orders")
    assert split_namespace("shop%Orders") == ("shop", "Orders")
    assert split_namespace("%RETRY%shop%billing") == ("shop", "%RETRY%billing")
    assert split_namespace("%DLQ%billing") == ("", "%DLQ%billing")
    assert split_namespace("rmq_sys_a%b") == ("", "rmq_sys_a%b")  # a system topic
    assert split_namespace("%Orders") == ("", "%Orders")

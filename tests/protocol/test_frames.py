"""Frame codec properties: any command round-trips; bad bytes never crash or hang the decoder."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.protocol.codes import LanguageCode, SerializeType
from engine.protocol.command import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    RemotingCommand,
    encode,
    request,
)
from engine.protocol.errors import FrameError, FrameTooLarge
from engine.protocol.frame import FrameDecoder

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
nonempty = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    serialize = draw(st.sampled_from(list(SerializeType)))
    binary = serialize == SerializeType.ROCKETMQ
    small = st.integers(-(2**15), 2**15 - 1)
    i32 = st.integers(-(2**31), 2**31 - 1)
    value = nonempty if binary else text  # binary headers read "" back as null
    return RemotingCommand(
        code=draw(small if binary else i32),
        opaque=draw(i32),
        flag=draw(st.sampled_from([0, FLAG_RESPONSE, FLAG_ONEWAY])),
        language=draw(st.sampled_from(list(LanguageCode))),
        version=draw(small if binary else st.integers(0, 10_000)),
        remark=draw(st.none() | (nonempty if binary else text)),
        ext_fields=draw(st.none() | st.dictionaries(nonempty, value, max_size=8).filter(
            lambda d: bool(d) or not binary)),
        body=draw(st.none() | st.binary(min_size=1, max_size=300)),
        serialize_type=serialize,
    )


@given(commands())
def test_any_command_round_trips(cmd: RemotingCommand) -> None:
    [decoded] = FrameDecoder().feed(encode(cmd))
    assert decoded == cmd


@given(st.lists(commands(), min_size=1, max_size=5), st.integers(1, 50))
def test_pipelined_commands_survive_any_split(cmds: list[RemotingCommand], step: int) -> None:
    stream = b"".join(encode(c) for c in cmds)
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for i in range(0, len(stream), step):
        out.extend(decoder.feed(stream[i : i + step]))
    assert out == cmds


@given(st.binary(max_size=2000))
def test_random_bytes_never_crash_the_decoder(data: bytes) -> None:
    decoder = FrameDecoder(max_frame=4096)
    try:
        decoder.feed(data)
    except FrameError:
        with pytest.raises(FrameError):
            decoder.feed(b"more")


@given(commands(), st.data())
def test_truncated_frames_wait_for_more(cmd: RemotingCommand, data: st.DataObject) -> None:
    frame = encode(cmd)
    cut = data.draw(st.integers(0, len(frame) - 1))
    decoder = FrameDecoder()
    assert decoder.feed(frame[:cut]) == []
    assert decoder.feed(frame[cut:]) == [cmd]


@given(commands(), st.integers(1, 64))
def test_corrupted_headers_raise_frame_error_or_decode(cmd: RemotingCommand, pos: int) -> None:
    frame = bytearray(encode(cmd))
    index = min(8 + pos, len(frame) - 1)
    frame[index] ^= 0xFF
    with contextlib.suppress(FrameError):
        FrameDecoder().feed(bytes(frame))


def test_oversized_frame_is_refused_before_it_is_buffered() -> None:
    decoder = FrameDecoder(max_frame=1024)
    with pytest.raises(FrameTooLarge, match="exceeds the maximum frame size of 1024"):
        decoder.feed(struct.pack(">I", 5000))


def test_default_max_frame_is_16_mib() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameTooLarge):
        decoder.feed(struct.pack(">I", 16 * 1024 * 1024))
    assert FrameDecoder().feed(struct.pack(">II", 16 * 1024 * 1024 - 4, 0)) == []


@pytest.mark.parametrize(
    "frame, message",
    [
        (struct.pack(">II", 3, 0), "smaller than its header word"),
        (struct.pack(">II", 4, 10), "exceeds the frame"),
        (struct.pack(">II", 6, 0x05000002) + b"{}", "unknown serialize type"),
        (struct.pack(">II", 7, 3) + b"{x}", "not valid JSON"),
        (struct.pack(">II", 6, 2) + b"[]", "not an object"),
        (struct.pack(">II", 9, 0x01000005) + b"\0" * 5, "shorter than its fixed part"),
    ],
)
def test_malformed_frames_have_clear_errors(frame: bytes, message: str) -> None:
    with pytest.raises(FrameError, match=message):
        FrameDecoder().feed(frame)


def test_lenient_json_header_values() -> None:
    header = (b'{"code":"10","language":3,"opaque":7,"flag":0,"version":63,'
              b'"extFields":{"queueId":2,"unitMode":false,"x":null,"n":1.5},"unknown":1}')
    [cmd] = FrameDecoder().feed(struct.pack(">II", 4 + len(header), len(header)) + header)
    assert cmd.code == 10
    assert cmd.language == LanguageCode.PYTHON
    assert cmd.ext_fields == {"queueId": "2", "unitMode": "false", "x": "", "n": "1.5"}


def test_json_header_is_written_as_java_writes_it() -> None:
    cmd = RemotingCommand(code=310, opaque=7, language=LanguageCode.JAVA, version=407,
                          ext_fields={"a": "PG", "b": "T"})
    assert encode(cmd)[8:] == (
        b'{"code":310,"extFields":{"a":"PG","b":"T"},"flag":0,"language":"JAVA",'
        b'"opaque":7,"serializeTypeCurrentRPC":"JSON","version":407}'
    )
    resp = RemotingCommand(code=310, opaque=7, flag=1, remark="hi", language=LanguageCode.JAVA,
                           version=407)
    assert encode(resp)[8:] == (
        b'{"code":310,"flag":1,"language":"JAVA","opaque":7,"remark":"hi",'
        b'"serializeTypeCurrentRPC":"JSON","version":407}'
    )


def test_response_keeps_opaque_and_serialize_type() -> None:
    req = request(105, {"topic": "T"}, serialize_type=SerializeType.ROCKETMQ).with_opaque(9)
    resp = req.response(17, "No topic route info in name server for the topic: T")
    assert resp.opaque == 9
    assert resp.is_response
    assert resp.serialize_type == SerializeType.ROCKETMQ

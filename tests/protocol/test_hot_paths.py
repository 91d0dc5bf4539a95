"""The hot paths' codecs equal the general ones: the precompiled send answer is byte for byte
the generic encoding of the same response, `make_command` is `RemotingCommand(...)`, and a
JSON header with non-string extFields values still reads them as Java's strings."""

from __future__ import annotations

import dataclasses

import pytest

from engine.protocol.codes import LanguageCode, ResponseCode, SerializeType
from engine.protocol.command import (
    FRAME_PREFIX,
    RemotingCommand,
    decode_frame,
    encode,
    make_command,
    request,
)
from engine.protocol.frame import FrameDecoder
from engine.protocol.header.broker import SendMessageResponseHeader
from engine.protocol.send_answer import SendAnswer, send_answer
from engine.protocol.wire import to_ext


def generic(opaque: int, msg_id: str, queue_id: int, queue_offset: int, region: str,
            trace_on: bool, serialize_type: SerializeType = SerializeType.JSON) -> bytes:
    cmd = request(310, serialize_type=serialize_type).with_opaque(opaque)
    ext = to_ext(SendMessageResponseHeader(msg_id, queue_id, queue_offset))
    ext["MSG_REGION"] = region
    ext["TRACE_ON"] = "true" if trace_on else "false"
    return encode(cmd.response(ResponseCode.SUCCESS, None, ext_fields=ext))


@pytest.mark.parametrize("region", ["DefaultRegion", "", "r%s\"é\\n"])
@pytest.mark.parametrize("trace_on", [True, False])
@pytest.mark.parametrize(("opaque", "queue_id", "offset"),
                         [(1, 0, 0), (2**31 - 1, 15, 2**63 - 1), (0, 3, 123456)])
def test_same_bytes_as_the_generic_encoding(region: str, trace_on: bool, opaque: int,
                                            queue_id: int, offset: int) -> None:
    msg_id = "7F00000100002A9F00000000000004D2"
    got = SendAnswer(region, trace_on).encode(opaque, msg_id, queue_id, offset)
    assert got == generic(opaque, msg_id, queue_id, offset, region, trace_on)
    [cmd] = FrameDecoder().feed(got)
    assert cmd.is_response and cmd.opaque == opaque and cmd.code == ResponseCode.SUCCESS
    assert cmd.ext_fields is not None and cmd.ext_fields["MSG_REGION"] == region
    binary = SendAnswer(region, trace_on).encode_binary(opaque, msg_id, queue_id, offset)
    assert binary == generic(opaque, msg_id, queue_id, offset, region, trace_on,
                             SerializeType.ROCKETMQ)


def test_batch_ids_and_shared_encoders() -> None:
    ids = "7F00000100002A9F00000000000004D2,7F00000100002A9F00000000000008D2"
    assert send_answer("R", True).encode(9, ids, 1, 2) == generic(9, ids, 1, 2, "R", True)
    assert send_answer("R", False).encode_binary(9, ids, 1, 2) == generic(
        9, ids, 1, 2, "R", False, SerializeType.ROCKETMQ)
    assert send_answer("R", True) is send_answer("R", True)


def test_make_command_is_the_dataclass() -> None:
    values = (310, 7, 2, LanguageCode.JAVA, 401, "r", {"a": "1"}, b"body",
              SerializeType.ROCKETMQ)
    made = make_command(*values)
    assert made == RemotingCommand(*values)
    assert repr(made) == repr(RemotingCommand(*values))
    with pytest.raises(AttributeError):
        made.code = 1  # type: ignore[misc]
    assert made.with_opaque(99) == dataclasses.replace(made, opaque=99)
    response = made.response(ResponseCode.SUCCESS, "ok")
    assert response == RemotingCommand(code=0, opaque=7, flag=1, remark="ok",
                                       serialize_type=SerializeType.ROCKETMQ)


def test_json_header_ext_values_of_other_types() -> None:
    header = (b'{"code":310,"extFields":{"a":"G","d":4,"k":true,"x":null,"o":{"n":1}},'
              b'"flag":0,"language":"JAVA","opaque":3,"version":401}')
    frame = FRAME_PREFIX.pack(4 + len(header), len(header)) + header
    cmd = decode_frame(frame, 4)
    assert cmd.ext_fields == {"a": "G", "d": "4", "k": "true", "x": "", "o": '{"n":1}'}
    assert (cmd.code, cmd.opaque, cmd.language) == (310, 3, LanguageCode.JAVA)

"""The success answer to a send, encoded straight to frame bytes from a precompiled template.

How this works: every acknowledged send is answered with the same JSON header but for five
values (msgId, queueId, queueOffset, opaque, and the broker's MSG_REGION/TRACE_ON, which
change only with its config).  `SendAnswer` renders that header with one `%` format and the
frame prefix with one `struct` pack, instead of building a `SendMessageResponseHeader`, its
extFields, a `RemotingCommand` and a JSON document per send.  The bytes are exactly those of
`encode(cmd.response(SUCCESS, ext_fields=...))` (tests/protocol compare them).  Requests with
ROCKETMQ binary headers (Java clients run with rocketmq.serialize.type=ROCKETMQ, as
Apache's benchmark tools set it) get the same answer in that form
(`encode_binary`): the frame prefix, command.py's BINARY_FIXED part and the extFields length
in one pack, the three per-send entries, and the broker's two entries as precomputed bytes.
"""

from __future__ import annotations

import struct
from functools import lru_cache

import orjson

from engine.protocol.codes import LanguageCode, SerializeType
from engine.protocol.command import BINARY_FIXED, FLAG_RESPONSE, FRAME_PREFIX
from engine.protocol.version import CURRENT_VERSION

_pack_prefix = FRAME_PREFIX.pack

# A binary answer's head: FRAME_PREFIX, then BINARY_FIXED (remark length 0), then
#   int32 extFields length
_BINARY_HEAD = struct.Struct(">" + FRAME_PREFIX.format.lstrip(">") +
                             BINARY_FIXED.format.lstrip(">") + "i")
assert _BINARY_HEAD.size == FRAME_PREFIX.size + BINARY_FIXED.size + 4
_pack_binary_head = _BINARY_HEAD.pack
_pack_int32 = struct.Struct(">i").pack
_BINARY_SERIALIZE = SerializeType.ROCKETMQ << 24
_VERSION16 = (CURRENT_VERSION & 0xFFFF) - (0x10000 if CURRENT_VERSION & 0x8000 else 0)


def _entry_key(key: str) -> bytes:
    """The start of one binary extFields entry: int16 key length, key."""
    raw = key.encode()
    return len(raw).to_bytes(2, "big") + raw


def _entry(key: str, value: str) -> bytes:
    raw = value.encode()
    return _entry_key(key) + _pack_int32(len(raw)) + raw


_MSG_ID = _entry_key("msgId")
_QUEUE_ID = _entry_key("queueId")
_QUEUE_OFFSET = _entry_key("queueOffset")


class SendAnswer:
    """Encodes SUCCESS answers to sends for one (MSG_REGION, TRACE_ON) pair."""

    __slots__ = ("_binary_tail", "_template")

    def __init__(self, region: str, trace_on: bool) -> None:
        # Keys in the order `encode_json_header` writes them, extFields in `to_ext` order.
        region_json = orjson.dumps(region).decode().replace("%", "%%")
        self._template = (
            '{"code":0,"extFields":{"msgId":"%s","queueId":"%d","queueOffset":"%d",'
            f'"MSG_REGION":{region_json},"TRACE_ON":"{"true" if trace_on else "false"}"}},'
            f'"flag":{FLAG_RESPONSE},"language":"{LanguageCode.PYTHON.name}","opaque":%d,'
            f'"serializeTypeCurrentRPC":"JSON","version":{CURRENT_VERSION}}}'
        )
        self._binary_tail = (_entry("MSG_REGION", region)
                             + _entry("TRACE_ON", "true" if trace_on else "false"))

    def encode(self, opaque: int, msg_id: str, queue_id: int, queue_offset: int) -> bytes:
        """The whole frame (length prefix included) answering the request `opaque`.

        `msg_id` must be an offset message id (hex digits and commas), as the store makes.
        """
        header = (self._template % (msg_id, queue_id, queue_offset, opaque)).encode()
        n = len(header)
        return _pack_prefix(4 + n, n) + header

    def encode_binary(self, opaque: int, msg_id: str, queue_id: int, queue_offset: int
                      ) -> bytes:
        """`encode`'s answer with a ROCKETMQ binary header (for requests sent that way)."""
        m = msg_id.encode()
        q = b"%d" % queue_id
        o = b"%d" % queue_offset
        ext = b"".join((_MSG_ID, _pack_int32(len(m)), m, _QUEUE_ID, _pack_int32(len(q)), q,
                        _QUEUE_OFFSET, _pack_int32(len(o)), o, self._binary_tail))
        n = BINARY_FIXED.size + 4 + len(ext)
        return _pack_binary_head(4 + n, _BINARY_SERIALIZE | n, 0, LanguageCode.PYTHON,
                                 _VERSION16, opaque, FLAG_RESPONSE, 0, len(ext)) + ext


@lru_cache(maxsize=8)
def send_answer(region: str, trace_on: bool) -> SendAnswer:
    """The shared encoder for a broker's MSG_REGION and TRACE_ON."""
    return SendAnswer(region, trace_on)

"""The success answer to a send, encoded straight to frame bytes from a precompiled template.

How this works: every acknowledged send is answered with the same JSON header but for five
values (msgId, queueId, queueOffset, opaque, and the broker's MSG_REGION/TRACE_ON, which
change only with its config).  `SendAnswer` renders that header with one `%` format and the
frame prefix with one `struct` pack, instead of building a `SendMessageResponseHeader`, its
extFields, a `RemotingCommand` and a JSON document per send.  The bytes are exactly those of
`encode(cmd.response(SUCCESS, ext_fields=...))` (tests/protocol compare them); requests with
ROCKETMQ binary headers are answered through `encode`.
"""

from __future__ import annotations

from functools import lru_cache

import orjson

from engine.protocol.codes import LanguageCode
from engine.protocol.command import FLAG_RESPONSE, FRAME_PREFIX
from engine.protocol.version import CURRENT_VERSION

_pack_prefix = FRAME_PREFIX.pack


class SendAnswer:
    """Encodes SUCCESS answers to sends for one (MSG_REGION, TRACE_ON) pair."""

    __slots__ = ("_template",)

    def __init__(self, region: str, trace_on: bool) -> None:
        # Keys in the order `encode_json_header` writes them, extFields in `to_ext` order.
        region_json = orjson.dumps(region).decode().replace("%", "%%")
        self._template = (
            '{"code":0,"extFields":{"msgId":"%s","queueId":"%d","queueOffset":"%d",'
            f'"MSG_REGION":{region_json},"TRACE_ON":"{"true" if trace_on else "false"}"}},'
            f'"flag":{FLAG_RESPONSE},"language":"{LanguageCode.PYTHON.name}","opaque":%d,'
            f'"serializeTypeCurrentRPC":"JSON","version":{CURRENT_VERSION}}}'
        )

    def encode(self, opaque: int, msg_id: str, queue_id: int, queue_offset: int) -> bytes:
        """The whole frame (length prefix included) answering the request `opaque`.

        `msg_id` must be an offset message id (hex digits and commas), as the store makes.
        """
        header = (self._template % (msg_id, queue_id, queue_offset, opaque)).encode()
        n = len(header)
        return _pack_prefix(4 + n, n) + header


@lru_cache(maxsize=8)
def send_answer(region: str, trace_on: bool) -> SendAnswer:
    """The shared encoder for a broker's MSG_REGION and TRACE_ON."""
    return SendAnswer(region, trace_on)

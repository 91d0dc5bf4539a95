"""Mutated real client frames: each one decodes, or is refused with a ProtocolError.

The frames of the golden captures are mutated (bytes flipped or cut, header numbers pushed
out of Java's ranges, extFields values garbled, bodies given nulls or invalid UTF-8) and
pushed through the frame decoder and then through the header and body decoding the broker
applies to that request code.  Anything but a `ProtocolError` is a bug.
"""

from __future__ import annotations

import contextlib
import json
import random
import struct
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from engine.protocol import fastjson
from engine.protocol.body.heartbeat import HeartbeatData
from engine.protocol.body.lock import LockBatchRequestBody, UnlockBatchRequestBody
from engine.protocol.codes import RequestCode
from engine.protocol.command import RemotingCommand, decode_frame
from engine.protocol.errors import FrameError, ProtocolError
from engine.protocol.frame import FrameDecoder
from engine.protocol.header import broker as hb
from engine.protocol.header.namesrv import GetRouteInfoRequestHeader
from engine.protocol.message import iter_batch_items
from engine.protocol.wire import from_ext, from_json
from tests.conftest import GOLDEN
from tests.protocol.golden import GoldenFrame, golden_frames

Check = Callable[[RemotingCommand], object]


def _body(cls: type) -> Check:
    return lambda cmd: from_json(cls, fastjson.loads(cmd.body or b"{}"))


def _batch(cmd: RemotingCommand) -> object:
    hb.decode_send_header_v2(cmd.ext_fields)
    return iter_batch_items(cmd.body or b"")


#: What the broker (or name server) decodes for each request code of the captures.
DECODERS: dict[int, Check] = {
    RequestCode.SEND_MESSAGE: lambda c: from_ext(hb.SendMessageRequestHeader, c.ext_fields),
    RequestCode.SEND_MESSAGE_V2: lambda c: hb.decode_send_header_v2(c.ext_fields),
    RequestCode.SEND_BATCH_MESSAGE: _batch,
    RequestCode.PULL_MESSAGE: lambda c: from_ext(hb.PullMessageRequestHeader, c.ext_fields),
    RequestCode.QUERY_CONSUMER_OFFSET:
        lambda c: from_ext(hb.QueryConsumerOffsetRequestHeader, c.ext_fields),
    RequestCode.UPDATE_CONSUMER_OFFSET:
        lambda c: from_ext(hb.UpdateConsumerOffsetRequestHeader, c.ext_fields),
    RequestCode.GET_MAX_OFFSET: lambda c: from_ext(hb.GetMaxOffsetRequestHeader, c.ext_fields),
    RequestCode.HEART_BEAT: _body(HeartbeatData),
    RequestCode.UNREGISTER_CLIENT:
        lambda c: from_ext(hb.UnregisterClientRequestHeader, c.ext_fields),
    RequestCode.GET_CONSUMER_LIST_BY_GROUP:
        lambda c: from_ext(hb.GetConsumerListByGroupRequestHeader, c.ext_fields),
    RequestCode.LOCK_BATCH_MQ: _body(LockBatchRequestBody),
    RequestCode.UNLOCK_BATCH_MQ: _body(UnlockBatchRequestBody),
    RequestCode.GET_ROUTEINFO_BY_TOPIC:
        lambda c: from_ext(GetRouteInfoRequestHeader, c.ext_fields),
}

FRAMES: list[GoldenFrame] = list(golden_frames(GOLDEN))

HUGE = [1 << 31, -(1 << 31) - 1, 1 << 63, -(1 << 63) - 1, 10**30, -(10**40)]
WEIRD: list[object] = ["", "-", "1e9", "0x10", " 7", "9" * 40, "-9223372036854775809", "\udcff",
                       "null", "true", None, [1, None], {"a": None}]
INSERTS = [b"null", b"\xff\xfe", b"[null]", b"\x00", b"999999999999999999999"]


def mutate(rnd: random.Random) -> bytes:
    """One golden frame, mutated one way (also used by the broker-level fuzz test)."""
    frame = rnd.choice(FRAMES)
    kind = rnd.choice(["bytes", "number", "ext", "body", "cut"])
    header = json.loads(json.dumps(frame.header))
    body = frame.body
    if kind == "number":
        header[rnd.choice(["code", "opaque", "flag", "version"])] = rnd.choice(HUGE)
    elif kind == "ext" and header.get("extFields"):
        key = rnd.choice(sorted(header["extFields"]))
        header["extFields"][key] = rnd.choice([str(rnd.choice(HUGE)), *WEIRD])
    elif kind == "body" and body:
        at = rnd.randrange(len(body))
        insert = rnd.choice(INSERTS)
        body = body[:at] + insert + body[at + len(insert):]
    raw = bytearray(_reframe(frame, header, body))
    if kind == "bytes":
        for _ in range(rnd.randint(1, 4)):
            raw[rnd.randrange(len(raw))] = rnd.randrange(256)
    elif kind == "cut":
        raw = raw[: rnd.randint(0, len(raw))]
    return bytes(raw)


def _reframe(frame: GoldenFrame, header: dict[str, Any], body: bytes) -> bytes:
    if frame.header.get("serializeTypeCurrentRPC", "JSON") != "JSON" or frame.serialize != 0:
        return frame.frame  # binary headers: mutated by bytes only
    head = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode(
        errors="surrogateescape")
    return struct.pack(">II", 4 + len(head) + len(body), len(head)) + head + body


@given(st.randoms(use_true_random=False), st.integers(1, 64))
def test_a_mutated_frame_decodes_or_is_refused(rnd: random.Random, chunk: int) -> None:
    raw = mutate(rnd)
    decoder = FrameDecoder()
    commands: list[RemotingCommand] = []
    try:
        for i in range(0, len(raw), chunk):
            commands += decoder.feed(raw[i : i + chunk])
    except FrameError:
        return
    for cmd in commands:
        check = DECODERS.get(cmd.code)
        if check is None:
            continue
        with contextlib.suppress(ProtocolError):  # refused: fine; anything else fails
            check(cmd)


def test_every_golden_frame_still_decodes() -> None:
    for frame in FRAMES:
        raw = frame.frame
        cmd = decode_frame(raw, 4, len(raw))
        check = DECODERS.get(cmd.code)
        if check is not None:
            check(cmd)

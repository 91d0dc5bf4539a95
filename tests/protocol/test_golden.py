"""Frames captured from the Java 4.9.8 and C++ 1.x clients decode and re-encode faithfully."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.protocol.codes import LanguageCode, SerializeType
from engine.protocol.command import encode
from engine.protocol.frame import FrameDecoder

from .golden import GoldenFrame, golden_frames


def _frames(golden_dir: Path) -> list[GoldenFrame]:
    frames = list(golden_frames(golden_dir))
    assert len(frames) > 300
    return frames


def test_reconstructed_frames_have_the_captured_header_lengths(golden_dir: Path) -> None:
    for g in _frames(golden_dir):
        word = int.from_bytes(g.frame[4:8], "big")
        assert word & 0xFFFFFF == g.header_len, (g.source, g.line)
        assert word >> 24 == g.serialize


def test_every_golden_frame_decodes(golden_dir: Path) -> None:
    for g in _frames(golden_dir):
        [cmd] = FrameDecoder().feed(g.frame)
        h = g.header
        assert cmd.code == h["code"]
        assert cmd.opaque == h["opaque"]
        assert cmd.flag == h["flag"]
        assert cmd.version == h["version"]
        assert LanguageCode(cmd.language).name == h["language"]
        assert cmd.serialize_type == g.serialize
        assert (cmd.body or b"") == g.body
        for key, value in (h.get("extFields") or {}).items():
            expected = value if isinstance(value, str) else str(value).lower() \
                if isinstance(value, bool) else str(value)
            if g.serialize == SerializeType.ROCKETMQ and value == "":
                assert key not in cmd.ext_fields  # zero-length strings read as null
            else:
                assert cmd.ext_fields is not None
                assert cmd.ext_fields[key] == expected, (g.source, g.line, key)


def test_every_golden_frame_reencodes_to_an_equal_command(golden_dir: Path) -> None:
    for g in _frames(golden_dir):
        [cmd] = FrameDecoder().feed(g.frame)
        [again] = FrameDecoder().feed(encode(cmd))
        assert again == cmd, (g.source, g.line)


def test_java_frames_reencode_to_the_captured_bytes_length(golden_dir: Path) -> None:
    """Our JSON header encoding is the one Java writes (key order, nulls omitted, enum names)."""
    java = [g for g in _frames(golden_dir) if g.header["language"] == "JAVA"]
    assert java
    for g in java:
        [cmd] = FrameDecoder().feed(g.frame)
        assert len(encode(cmd)) == len(g.frame), (g.source, g.line)


def test_binary_golden_frames_reencode_byte_for_byte(golden_dir: Path) -> None:
    binary = [g for g in _frames(golden_dir) if g.serialize == SerializeType.ROCKETMQ]
    assert binary
    for g in binary:
        [cmd] = FrameDecoder().feed(g.frame)
        assert encode(cmd) == g.frame, (g.source, g.line)


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_golden_stream_decodes_in_any_chunking(golden_dir: Path, chunk: int) -> None:
    frames = _frames(golden_dir)
    stream = b"".join(g.frame for g in frames)
    decoder = FrameDecoder()
    out = []
    for i in range(0, len(stream), chunk):
        out.extend(decoder.feed(stream[i : i + chunk]))
    assert [c.opaque for c in out] == [g.header["opaque"] for g in frames]
    assert decoder.buffered == 0

"""The HA wire layouts and their incremental decoders."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.ha.errors import HAProtocolError
from engine.ha.wire import (
    REPORT,
    TRANSFER_HEADER,
    ReportDecoder,
    Transfer,
    TransferDecoder,
    encode_report,
    encode_transfer_header,
)


def test_layouts_are_big_endian_and_sized_as_rocketmq() -> None:
    assert REPORT.size == 8 and TRANSFER_HEADER.size == 12
    assert encode_report(0x0102030405060708) == bytes(range(1, 9))
    assert encode_transfer_header(1 << 32, 5) == b"\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x05"


def test_report_decoder_keeps_partial_reports() -> None:
    d = ReportDecoder()
    data = encode_report(7) + encode_report(300)
    assert d.feed(data[:5]) == []
    assert d.feed(data[5:11]) == [7]
    assert d.feed(data[11:]) == [300]


def test_transfer_decoder_handles_heartbeats_and_split_bodies() -> None:
    d = TransferDecoder()
    frame = encode_transfer_header(4096, 3) + b"abc" + encode_transfer_header(4099, 0)
    assert d.feed(frame[:13]) == []
    assert d.buffered == 13
    got = d.feed(frame[13:])
    assert got == [Transfer(4096, b"abc"), Transfer(4099, b"")]
    assert got[1].is_heartbeat and not got[0].is_heartbeat and d.buffered == 0


@pytest.mark.parametrize("size", [-1, 65])
def test_transfer_decoder_refuses_bad_sizes(size: int) -> None:
    with pytest.raises(HAProtocolError):
        TransferDecoder(max_body=64).feed(encode_transfer_header(0, size))


@given(st.lists(st.integers(0, 2**63 - 1), max_size=20), st.lists(st.integers(1, 17)))
def test_reports_survive_any_split(offsets: list[int], cuts: list[int]) -> None:
    data = b"".join(map(encode_report, offsets))
    d = ReportDecoder()
    got: list[int] = []
    pos = 0
    for cut in cuts:
        got += d.feed(data[pos:pos + cut])
        pos += cut
    got += d.feed(data[pos:])
    assert got == offsets


@given(st.lists(st.tuples(st.integers(0, 2**62), st.binary(max_size=40)), max_size=12),
       st.lists(st.integers(1, 30)))
def test_transfers_survive_any_split(frames: list[tuple[int, bytes]], cuts: list[int]) -> None:
    data = b"".join(encode_transfer_header(o, len(b)) + b for o, b in frames)
    d = TransferDecoder()
    got: list[Transfer] = []
    pos = 0
    for cut in cuts:
        got += d.feed(data[pos:pos + cut])
        pos += cut
    got += d.feed(data[pos:])
    assert got == [Transfer(o, b) for o, b in frames]
    assert d.buffered == 0

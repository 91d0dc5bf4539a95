"""Our HPACK decoder against the hpack package's: the same fields and the same dynamic table
for blocks from a real encoder (Huffman or not, indexed or not, never-indexed fields, table
size changes), the same verdict on arbitrary bytes; and RFC 7541 appendix C's examples."""

from __future__ import annotations

import pytest
from hpack import Decoder, Encoder, NeverIndexedHeaderTuple
from hpack.exceptions import HPACKError
from hpack.huffman import HuffmanEncoder
from hpack.huffman_constants import REQUEST_CODES, REQUEST_CODES_LENGTH
from hpack.huffman_table import decode_huffman
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.proxy.h2.frames import STATIC_TABLE
from engine.proxy.h2.hpack_decoder import (
    HeaderListTooLarge,
    HpackDecoder,
    HpackError,
    huffman_decode,
)

_names = st.one_of(st.sampled_from([name for name, _ in STATIC_TABLE]),
                   st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=20))
_values = st.one_of(st.sampled_from(["", "0", "POST", "application/grpc", "x" * 200]),
                    st.text(max_size=60))
_field = st.tuples(_names, _values, st.booleans())  # the last: never indexed
_block = st.tuples(st.lists(_field, max_size=12), st.booleans(),
                   st.sampled_from([None, 0, 64, 256, 4096]))


def _theirs(decoder: Decoder, block: bytes) -> list[tuple[str, str]]:
    return [(n.decode("utf-8", "surrogateescape"), v.decode("utf-8", "surrogateescape"))
            for n, v in decoder.decode(block, raw=True)]


def _their_table(decoder: Decoder) -> list[tuple[str, str]]:
    return [(n.decode(), v.decode()) for n, v in decoder.header_table.dynamic_entries]


@settings(max_examples=200, deadline=None)
@given(st.lists(_block, min_size=1, max_size=8))
def test_blocks_from_an_encoder(blocks: list[tuple[list[tuple[str, str, bool]], bool,
                                                   int | None]]) -> None:
    encoder = Encoder()
    ours, theirs = HpackDecoder(1 << 20), Decoder(1 << 20)
    for fields, huffman, table_size in blocks:
        if table_size is not None:
            encoder.header_table_size = table_size  # a size update opens the next block
        pairs = [NeverIndexedHeaderTuple(n, v) if never else (n, v) for n, v, never in fields]
        block = encoder.encode(pairs, huffman=huffman)
        decoded = ours.decode(block)
        assert decoded == _theirs(theirs, block) == [(n, v) for n, v, _ in fields]
        assert ours.table == _their_table(theirs)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.binary(max_size=30), min_size=1, max_size=4))
def test_any_bytes_same_verdict(blocks: list[bytes]) -> None:
    ours, theirs = HpackDecoder(1 << 20), Decoder(1 << 20)
    for block in blocks:
        try:
            expected = _theirs(theirs, block)
        except HPACKError:
            with pytest.raises(HpackError):
                ours.decode(block)
            return
        assert ours.decode(block) == expected


def test_rfc7541_c4_requests_with_huffman() -> None:
    decoder = HpackDecoder(1 << 20)
    assert decoder.decode(bytes.fromhex("828684418cf1e3c2e5f23a6ba0ab90f4ff")) == [
        (":method", "GET"), (":scheme", "http"), (":path", "/"),
        (":authority", "www.example.com")]
    assert decoder.decode(bytes.fromhex("828684be5886a8eb10649cbf")) == [
        (":method", "GET"), (":scheme", "http"), (":path", "/"),
        (":authority", "www.example.com"), ("cache-control", "no-cache")]
    assert decoder.decode(bytes.fromhex(
        "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf")) == [
        (":method", "GET"), (":scheme", "https"), (":path", "/index.html"),
        (":authority", "www.example.com"), ("custom-key", "custom-value")]
    assert decoder.table == [("custom-key", "custom-value"), ("cache-control", "no-cache"),
                             (":authority", "www.example.com")]


def test_rfc7541_c5_eviction() -> None:
    decoder = HpackDecoder(1 << 20, max_table_size=256)
    decoder.decode(b"\x3f\xe1\x01" + bytes.fromhex(  # size update to 256, then C.5.1
        "4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120"
        "474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d"))
    decoder.decode(bytes.fromhex("4803333037c1c0bf"))
    assert decoder.table == [(":status", "307"), ("location", "https://www.example.com"),
                             ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
                             ("cache-control", "private")]
    decoder.decode(bytes.fromhex(
        "88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a6970"
        "7738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d61"
        "67653d333630303b2076657273696f6e3d31"))
    assert [name for name, _ in decoder.table] == ["set-cookie", "content-encoding", "date"]


def test_limits() -> None:
    with pytest.raises(HeaderListTooLarge):
        HpackDecoder(40).decode(b"\x82\x82")  # 2 x (7 + 3 + 32)
    with pytest.raises(HpackError):
        HpackDecoder(1000).decode(b"\x82\x3f\xe1\x1f")  # a size update after a field
    with pytest.raises(HpackError):
        HpackDecoder(1000).decode(b"\x3f\xe2\x1f")  # 4097: over our SETTINGS
    with pytest.raises(HpackError):
        HpackDecoder(1000).decode(b"\xff" + b"\x80" * 5 + b"\x01")  # an endless integer
    assert HpackDecoder(1000).decode(b"\x00\x01a\x02\xff\xfe")[0][1].encode(
        "utf-8", "surrogateescape") == b"\xff\xfe"


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=40))
def test_huffman_as_hpack_decodes_it(raw: bytes) -> None:
    try:
        expected = decode_huffman(raw)
    except HPACKError:
        with pytest.raises(HpackError):
            huffman_decode(raw)
        return
    assert huffman_decode(raw) == expected


@given(st.binary(max_size=100))
def test_huffman_round_trip(octets: bytes) -> None:
    coded = HuffmanEncoder(REQUEST_CODES, REQUEST_CODES_LENGTH).encode(octets)
    assert huffman_decode(coded) == octets

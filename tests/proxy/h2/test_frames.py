"""Our HPACK header blocks decode to what was encoded, with any HPACK decoder, and leave its
dynamic table empty; frames are laid out as RFC 9113 section 4.1 draws them."""

from __future__ import annotations

from hpack import Decoder
from hypothesis import given
from hypothesis import strategies as st

from engine.proxy.h2.frames import (
    HEADERS,
    STATIC_TABLE,
    encode_field,
    encode_frame,
    encode_headers,
    encode_integer,
)

_names = st.one_of(st.sampled_from([name for name, _ in STATIC_TABLE]),
                   st.text("abcdefghijklmnopqrstuvwxyz-0123456789", min_size=1, max_size=300))
_values = st.one_of(st.sampled_from([value for _, value in STATIC_TABLE]),
                    st.text(max_size=300))


@given(st.lists(st.tuples(_names, _values), max_size=20))
def test_blocks_decode_to_their_fields(fields: list[tuple[str, str]]) -> None:
    decoder = Decoder(1 << 20)
    for _ in range(2):  # the second time from the encoder's cache
        assert [(str(n), str(v)) for n, v in decoder.decode(encode_headers(fields))] == fields
        assert not decoder.header_table.dynamic_entries


def test_static_fields_are_indexed_and_names_reused() -> None:
    assert encode_field(":status", "200") == b"\x88"
    assert encode_field(":status", "503") == b"\x08\x03503"          # name 8, literal value
    assert encode_field("www-authenticate", "") == b"\x0f\x2e\x00"  # name 61: 15 + 46
    assert encode_field("grpc-status", "0") == b"\x00\x0bgrpc-status\x010"


def test_integers_past_their_prefix() -> None:  # RFC 7541 appendix C.1
    assert encode_integer(10, 5, 0) == b"\x0a"
    assert encode_integer(1337, 5, 0) == b"\x1f\x9a\x0a"
    assert encode_integer(31, 5, 0x20) == b"\x3f\x00"


def test_a_frame_header() -> None:
    assert encode_frame(HEADERS, 0x25, 0x7FFF_FFFF, b"ab") == (
        b"\x00\x00\x02\x01\x25\x7f\xff\xff\xffab")

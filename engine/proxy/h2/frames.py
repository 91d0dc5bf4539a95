"""HTTP/2 wire values (RFC 9113 section 4, 6, 7): frame header layout, frame types, flags,
error codes, SETTINGS ids, and the encoders of frames and of our HPACK header blocks.

Frame header (RFC 9113 section 4.1), 9 bytes, big-endian:

    +-----------------------------------------------+
    |                 Length (24)                   |
    +---------------+---------------+---------------+
    |   Type (8)    |   Flags (8)   |
    +-+-------------+---------------+-------------------------------+
    |R|                 Stream Identifier (31)                      |
    +=+=============================================================+

Declared as one struct of three fields: the length and the type together in the first
unsigned 32-bit word (length << 8 | type), the flags, then R + stream id.

Our header blocks (`encode_headers`) never touch the HPACK dynamic table: a field whose name
and value are both in the static table is an indexed field (RFC 7541 section 6.1), any other
is a literal without indexing (section 6.2.2) whose name is a static-table index when the
static table has the name; strings are raw (no Huffman).  So the peer's decoder state never
depends on what we sent, and we keep no encoder state.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable
from typing import Final

HEADER: Final = struct.Struct(
    ">I"  # length (24 bits) << 8 | type (8 bits)
    "B"   # flags
    "I"   # R (1 bit, ignored on receipt, 0 when sent) + stream identifier (31 bits)
)
assert HEADER.size == 9

#: The client connection preface (RFC 9113 section 3.4), before the client's SETTINGS.
PREFACE: Final = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
assert len(PREFACE) == 24

STREAM_ID_MASK: Final = 0x7FFF_FFFF
#: The largest flow-control window (RFC 9113 section 6.9.1).
MAX_WINDOW: Final = 0x7FFF_FFFF
#: SETTINGS_INITIAL_WINDOW_SIZE and the connection window until changed (section 6.9.2).
DEFAULT_WINDOW: Final = 65_535
#: SETTINGS_MAX_FRAME_SIZE: its initial value, the largest value allowed (section 6.5.2).
DEFAULT_MAX_FRAME_SIZE: Final = 16_384
LARGEST_MAX_FRAME_SIZE: Final = 0xFF_FFFF

# Frame types (section 6), plain ints for the hot loop; FrameType names them.
DATA: Final = 0x0
HEADERS: Final = 0x1
PRIORITY: Final = 0x2
RST_STREAM: Final = 0x3
SETTINGS: Final = 0x4
PUSH_PROMISE: Final = 0x5
PING: Final = 0x6
GOAWAY: Final = 0x7
WINDOW_UPDATE: Final = 0x8
CONTINUATION: Final = 0x9

# Flags (section 6), by the frame types that define them.
END_STREAM: Final = 0x1   # DATA, HEADERS
ACK: Final = 0x1          # SETTINGS, PING
END_HEADERS: Final = 0x4  # HEADERS, CONTINUATION
PADDED: Final = 0x8       # DATA, HEADERS
PRIORITY_FLAG: Final = 0x20  # HEADERS


class FrameType(enum.IntEnum):
    """Frame types (RFC 9113 section 6), for messages and tests."""

    DATA = DATA
    HEADERS = HEADERS
    PRIORITY = PRIORITY
    RST_STREAM = RST_STREAM
    SETTINGS = SETTINGS
    PUSH_PROMISE = PUSH_PROMISE
    PING = PING
    GOAWAY = GOAWAY
    WINDOW_UPDATE = WINDOW_UPDATE
    CONTINUATION = CONTINUATION


class ErrorCode(enum.IntEnum):
    """Error codes of RST_STREAM and GOAWAY (RFC 9113 section 7)."""

    NO_ERROR = 0x0
    PROTOCOL_ERROR = 0x1
    INTERNAL_ERROR = 0x2
    FLOW_CONTROL_ERROR = 0x3
    SETTINGS_TIMEOUT = 0x4
    STREAM_CLOSED = 0x5
    FRAME_SIZE_ERROR = 0x6
    REFUSED_STREAM = 0x7
    CANCEL = 0x8
    COMPRESSION_ERROR = 0x9
    CONNECT_ERROR = 0xA
    ENHANCE_YOUR_CALM = 0xB
    INADEQUATE_SECURITY = 0xC
    HTTP_1_1_REQUIRED = 0xD


class Setting(enum.IntEnum):
    """SETTINGS parameter ids (RFC 9113 section 6.5.2)."""

    HEADER_TABLE_SIZE = 0x1
    ENABLE_PUSH = 0x2
    MAX_CONCURRENT_STREAMS = 0x3
    INITIAL_WINDOW_SIZE = 0x4
    MAX_FRAME_SIZE = 0x5
    MAX_HEADER_LIST_SIZE = 0x6


#: One SETTINGS parameter: id (16 bits), value (32 bits).
SETTING: Final = struct.Struct(">HI")
assert SETTING.size == 6
#: RST_STREAM's error code, WINDOW_UPDATE's R + increment: one unsigned 32-bit word.
WORD: Final = struct.Struct(">I")
#: GOAWAY: R + last stream id, error code; additional debug data follows.
GOAWAY_HEAD: Final = struct.Struct(">II")
assert GOAWAY_HEAD.size == 8


def encode_frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    """One frame: the 9-byte header, then `payload` (the caller keeps it within the peer's
    SETTINGS_MAX_FRAME_SIZE)."""
    return HEADER.pack(len(payload) << 8 | kind, flags, stream_id) + payload


def encode_settings(values: Iterable[tuple[int, int]]) -> bytes:
    """A SETTINGS frame (not an ACK) carrying `values` in order."""
    return encode_frame(SETTINGS, 0, 0, b"".join(SETTING.pack(k, v) for k, v in values))


def encode_rst_stream(stream_id: int, error_code: int) -> bytes:
    return encode_frame(RST_STREAM, 0, stream_id, WORD.pack(error_code))


def encode_window_update(stream_id: int, increment: int) -> bytes:
    return encode_frame(WINDOW_UPDATE, 0, stream_id, WORD.pack(increment))


def encode_goaway(last_stream_id: int, error_code: int, debug: bytes = b"") -> bytes:
    return encode_frame(GOAWAY, 0, 0, GOAWAY_HEAD.pack(last_stream_id, error_code) + debug)


#: The HPACK static table (RFC 7541 appendix A): entry i is STATIC_TABLE[i - 1].
STATIC_TABLE: Final = (
    (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"),
    (":path", "/index.html"), (":scheme", "http"), (":scheme", "https"), (":status", "200"),
    (":status", "204"), (":status", "206"), (":status", "304"), (":status", "400"),
    (":status", "404"), (":status", "500"), ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""),
    ("accept", ""), ("access-control-allow-origin", ""), ("age", ""), ("allow", ""),
    ("authorization", ""), ("cache-control", ""), ("content-disposition", ""),
    ("content-encoding", ""), ("content-language", ""), ("content-length", ""),
    ("content-location", ""), ("content-range", ""), ("content-type", ""), ("cookie", ""),
    ("date", ""), ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""),
    ("if-match", ""), ("if-modified-since", ""), ("if-none-match", ""), ("if-range", ""),
    ("if-unmodified-since", ""), ("last-modified", ""), ("link", ""), ("location", ""),
    ("max-forwards", ""), ("proxy-authenticate", ""), ("proxy-authorization", ""),
    ("range", ""), ("referer", ""), ("refresh", ""), ("retry-after", ""), ("server", ""),
    ("set-cookie", ""), ("strict-transport-security", ""), ("transfer-encoding", ""),
    ("user-agent", ""), ("vary", ""), ("via", ""), ("www-authenticate", ""),
)
assert len(STATIC_TABLE) == 61
#: (name, value) -> static index, for indexed fields.
_STATIC_FIELD: Final = {field: i for i, field in enumerate(STATIC_TABLE, 1) if field[1]}
#: name -> the first static index with that name, for literal fields.
_STATIC_NAME: Final = {name: i for i, (name, _) in reversed(list(enumerate(STATIC_TABLE, 1)))}


def encode_integer(value: int, prefix_bits: int, first: int) -> bytes:
    """An HPACK integer (RFC 7541 section 5.1) whose first byte carries `first`'s high
    bits."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out = bytearray((first | limit,))
    value -= limit
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _string(text: str) -> bytes:
    raw = text.encode()
    return encode_integer(len(raw), 7, 0) + raw


def _name_part(name: str) -> bytes:
    index = _STATIC_NAME.get(name)
    if index is not None:
        return encode_integer(index, 4, 0)  # literal without indexing, indexed name
    return b"\x00" + _string(name)    # literal without indexing, new name


#: Encoded names and whole fields already seen (a server sends few distinct ones).
_NAMES: dict[str, bytes] = {}
_FIELDS: dict[tuple[str, str], bytes] = {}
_FIELDS_LIMIT: Final = 4096


def encode_field(name: str, value: str) -> bytes:
    """One header field (`name` lowercase, as HTTP/2 requires) as our encoder writes it."""
    index = _STATIC_FIELD.get((name, value))
    if index is not None:
        return encode_integer(index, 7, 0x80)
    prefix = _NAMES.get(name)
    if prefix is None:
        prefix = _NAMES[name] = _name_part(name)
    return prefix + _string(value)


def encode_headers(pairs: Iterable[tuple[str, str]]) -> bytes:
    """An HPACK header block of `pairs`, in order, that leaves the dynamic table alone.

    Fields seen before come from a bounded cache (responses repeat the same few).
    """
    out = []
    fields = _FIELDS
    for pair in pairs:
        encoded = fields.get(pair)
        if encoded is None:
            encoded = encode_field(*pair)
            if len(fields) >= _FIELDS_LIMIT:
                fields.clear()
            fields[pair] = encoded
        out.append(encoded)
    return b"".join(out)

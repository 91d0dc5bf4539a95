"""ServerConnection driven with hand-built frames: a unary exchange byte for byte, input split
anywhere, the HPACK cache, CONTINUATION, every protocol error with its code, flow control both
ways, graceful GOAWAY, and any input never raising."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hpack import Encoder
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.proxy.h2.connection import ServerConnection
from engine.proxy.h2.events import (
    ConnectionEnded,
    DataReceived,
    H2Error,
    PingAcknowledged,
    RequestReceived,
    StreamReset,
)
from engine.proxy.h2.frames import (
    ACK,
    CONTINUATION,
    DATA,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    PADDED,
    PING,
    PRIORITY,
    PRIORITY_FLAG,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    WINDOW_UPDATE,
    ErrorCode,
    encode_headers,
)
from tests.proxy.h2.peer import Frame, Peer, read_frames, word
from tests.proxy.h2frames import PREFACE, continuation_flood, frame, start, window_update

#: POST http /x, content-type application/grpc (static 3, 6; literal :path; literal value).
REQUEST = (b"\x83\x86" + b"\x04\x02/x" + b"\x0f\x10\x10application/grpc")
REQUEST_FIELDS = [(":method", "POST"), (":scheme", "http"), (":path", "/x"),
                  ("content-type", "application/grpc")]
HEAD = encode_headers([(":status", "200"), ("content-type", "application/grpc")])
TRAILERS = encode_headers([("grpc-status", "0")])
MESSAGE = b"\x00\x00\x00\x00\x03abc"


def setting(ident: int, value: int) -> bytes:
    return struct.pack(">HI", ident, value)


def content_length(value: str) -> bytes:
    """A content-length field, a literal never indexed."""
    return b"\x00\x0econtent-length" + bytes([len(value)]) + value.encode()


def request(stream: int, body: bytes = MESSAGE) -> bytes:
    return frame(HEADERS, END_HEADERS, stream, REQUEST) + frame(DATA, END_STREAM, stream, body)


def connection_error(peer: Peer, data: bytes) -> tuple[int, int]:
    """Send `data`; expect a connection error: (GOAWAY's error code, its last stream id)."""
    events = peer.send(data)
    assert isinstance(events[-1], ConnectionEnded) and not events[-1].by_peer, events
    goaway = peer.frames()[-1]
    assert goaway.kind == GOAWAY
    assert peer.send(request(99)) == [] and peer.conn.data_to_send() == b""
    assert events[-1].error_code == word(goaway, 4)
    return word(goaway, 4), word(goaway)


def stream_error(peer: Peer, data: bytes) -> tuple[int, int]:
    """Send `data`; expect RST_STREAM and a connection that still serves: (stream, code)."""
    peer.send(data)
    resets = [f for f in peer.frames() if f.kind == RST_STREAM]
    assert len(resets) == 1, resets
    peer.send(frame(PING, 0, 0, b"12345678"))
    assert peer.frames() == [Frame(PING, ACK, 0, b"12345678")]
    return resets[0].stream, word(resets[0])


# -- the exchange ---------------------------------------------------------------------------


def test_a_unary_exchange_byte_for_byte() -> None:
    conn = ServerConnection()
    conn.initiate()
    assert conn.data_to_send() == (
        frame(SETTINGS, 0, 0, setting(3, 1000) + setting(4, 1 << 20) + setting(6, 16384))
        + window_update(0, (16 << 20) - 65535))
    events = conn.receive(start() + request(1))
    assert events == [RequestReceived(1, REQUEST_FIELDS, False), DataReceived(1, MESSAGE, True)]
    assert conn.data_to_send() == frame(SETTINGS, ACK, 0)
    assert HEAD == b"\x88\x0f\x10\x10application/grpc"
    assert TRAILERS == b"\x00\x0bgrpc-status\x010"
    conn.send_unary(1, HEAD, b"\x00\x00\x00\x00\x01z", TRAILERS)
    assert conn.data_to_send() == (frame(HEADERS, END_HEADERS, 1, HEAD)
                                   + frame(DATA, 0, 1, b"\x00\x00\x00\x00\x01z")
                                   + frame(HEADERS, END_HEADERS | END_STREAM, 1, TRAILERS))
    assert conn.open_streams == 0
    assert conn.data_to_send() == b""


def test_our_ping_and_its_ack() -> None:
    peer = Peer.started()
    peer.conn.ping(b"keepaliv")
    assert peer.frames() == [Frame(PING, 0, 0, b"keepaliv")]
    assert peer.send(frame(PING, ACK, 0, b"keepaliv")) == [PingAcknowledged(b"keepaliv")]
    assert peer.frames() == []  # an ACK is not answered
    peer.conn.goaway(ErrorCode.PROTOCOL_ERROR)
    peer.frames()
    peer.conn.ping()  # the connection ended: nothing more is sent
    assert peer.frames() == []


def test_input_split_at_every_byte() -> None:
    whole = start() + frame(SETTINGS, ACK, 0) + request(1) + frame(PING, 0, 0, b"pingpong")
    expected = [RequestReceived(1, REQUEST_FIELDS, False), DataReceived(1, MESSAGE, True)]
    for cut in range(1, len(whole)):
        conn = ServerConnection()
        events = conn.receive(whole[:cut]) + conn.receive(whole[cut:])
        assert events == expected, cut
        assert read_frames(conn.data_to_send())[-1] == Frame(PING, ACK, 0, b"pingpong")
    conn = ServerConnection()
    assert [e for i in range(len(whole)) for e in conn.receive(whole[i:i + 1])] == expected


def test_many_frames_in_one_receive() -> None:
    peer = Peer.started()
    events = peer.send(b"".join(request(stream) for stream in range(1, 129, 2)))
    assert len(events) == 128 and peer.conn.open_streams == 64
    for stream in range(1, 129, 2):
        peer.conn.send_unary(stream, HEAD, MESSAGE, TRAILERS)
    frames = peer.frames()
    assert len(frames) == 192 and peer.conn.open_streams == 0
    assert peer.headers(frames)[-1] == (127, [("grpc-status", "0")], True)


def test_the_header_cache_follows_the_dynamic_table() -> None:
    peer = Peer.started()
    first = b"\x83\x86\x84" + b"\x40\x04x-id\x011"  # literal with indexing: x-id 1 -> 62
    indexed = b"\x83\x86\x84\xbe"                     # all indexed: 62 is x-id now
    later = b"\x83\x86\x84" + b"\x40\x04x-id\x012"   # x-id 2 -> 62, x-id 1 -> 63
    base = [(":method", "POST"), (":scheme", "http"), (":path", "/")]
    blocks = [first, indexed, indexed, later, indexed, indexed + b"\xbf"]
    events = peer.send(b"".join(frame(HEADERS, END_HEADERS | END_STREAM, 2 * i + 1, block)
                                for i, block in enumerate(blocks)))
    assert [e.headers for e in events if isinstance(e, RequestReceived)] == [
        [*base, ("x-id", "1")], [*base, ("x-id", "1")], [*base, ("x-id", "1")],
        [*base, ("x-id", "2")], [*base, ("x-id", "2")], [*base, ("x-id", "2"), ("x-id", "1")]]
    assert events[1].headers is not events[2].headers  # type: ignore[union-attr]


def test_a_header_block_across_continuations() -> None:
    peer = Peer.started()
    events = peer.send(frame(HEADERS, 0, 1, REQUEST[:3]) + frame(CONTINUATION, 0, 1, REQUEST[3:9])
                       + frame(CONTINUATION, END_HEADERS, 1, REQUEST[9:]))
    assert events == [RequestReceived(1, REQUEST_FIELDS, False)]


@pytest.mark.parametrize("between", [frame(PING, 0, 0, b"pingpong"), window_update(0, 1),
                                     frame(CONTINUATION, END_HEADERS, 3, REQUEST),
                                     frame(HEADERS, END_HEADERS, 3, REQUEST)])
def test_another_frame_inside_a_header_block(between: bytes) -> None:
    peer = Peer.started()
    assert connection_error(peer, frame(HEADERS, 0, 1, REQUEST) + between) == (
        ErrorCode.PROTOCOL_ERROR, 0)


def test_a_continuation_flood_is_cut_short() -> None:
    peer = Peer.started()
    flood = continuation_flood(10_000)
    events = peer.send(flood)
    assert events == [ConnectionEnded(ErrorCode.PROTOCOL_ERROR, 0, False)]
    assert read_frames(peer.conn.data_to_send())[-1].kind == GOAWAY


def test_an_oversized_header_list() -> None:
    peer = Peer.started(ServerConnection(max_header_list_size=100))
    block = b"\x83\x86\x84" + b"\x00\x01a\x7f\x00" + b"x" * 127  # a: 127 x's, 160 with overhead
    assert connection_error(peer, frame(HEADERS, END_HEADERS, 1, block))[0] == (
        ErrorCode.PROTOCOL_ERROR)


# -- connection errors ----------------------------------------------------------------------

OPEN = request(1)  # a finished request on stream 1 before the offending frames

CONNECTION_ERRORS = {
    "HEADERS on an even stream": (frame(HEADERS, END_HEADERS, 2, REQUEST),
                                  ErrorCode.PROTOCOL_ERROR),
    "HEADERS on stream 0": (frame(HEADERS, END_HEADERS, 0, REQUEST), ErrorCode.PROTOCOL_ERROR),
    "a stream id going back": (OPEN + request(5) + request(3), ErrorCode.PROTOCOL_ERROR),
    "DATA on an idle stream": (frame(DATA, 0, 3, b"x"), ErrorCode.PROTOCOL_ERROR),
    "DATA on stream 0": (frame(DATA, 0, 0, b"x"), ErrorCode.PROTOCOL_ERROR),
    "PUSH_PROMISE": (frame(PUSH_PROMISE, END_HEADERS, 1, b"\x00\x00\x00\x02" + REQUEST),
                     ErrorCode.PROTOCOL_ERROR),
    "CONTINUATION alone": (frame(CONTINUATION, END_HEADERS, 1, REQUEST), ErrorCode.PROTOCOL_ERROR),
    "PRIORITY on stream 0": (frame(PRIORITY, 0, 0, b"\x00\x00\x00\x01\x10"),
                             ErrorCode.PROTOCOL_ERROR),
    "ENABLE_PUSH 2": (frame(SETTINGS, 0, 0, setting(2, 2)), ErrorCode.PROTOCOL_ERROR),
    "INITIAL_WINDOW_SIZE 2^31": (frame(SETTINGS, 0, 0, setting(4, 1 << 31)),
                                 ErrorCode.FLOW_CONTROL_ERROR),
    "MAX_FRAME_SIZE too small": (frame(SETTINGS, 0, 0, setting(5, 16383)),
                                 ErrorCode.PROTOCOL_ERROR),
    "MAX_FRAME_SIZE too large": (frame(SETTINGS, 0, 0, setting(5, 1 << 24)),
                                 ErrorCode.PROTOCOL_ERROR),
    "SETTINGS of 5 bytes": (frame(SETTINGS, 0, 0, b"\x00" * 5), ErrorCode.FRAME_SIZE_ERROR),
    "SETTINGS ACK with a payload": (frame(SETTINGS, ACK, 0, setting(4, 1)),
                                    ErrorCode.FRAME_SIZE_ERROR),
    "SETTINGS on a stream": (frame(SETTINGS, 0, 1), ErrorCode.PROTOCOL_ERROR),
    "PING of 7 bytes": (frame(PING, 0, 0, b"1234567"), ErrorCode.FRAME_SIZE_ERROR),
    "PING on a stream": (frame(PING, 0, 1, b"12345678"), ErrorCode.PROTOCOL_ERROR),
    "GOAWAY on a stream": (frame(GOAWAY, 0, 1, b"\x00" * 8), ErrorCode.PROTOCOL_ERROR),
    "connection WINDOW_UPDATE of 0": (window_update(0, 0), ErrorCode.PROTOCOL_ERROR),
    "connection window overflow": (window_update(0, 0x7FFF_FFFF), ErrorCode.FLOW_CONTROL_ERROR),
    "WINDOW_UPDATE of 3 bytes": (frame(WINDOW_UPDATE, 0, 0, b"\x00\x00\x01"),
                                 ErrorCode.FRAME_SIZE_ERROR),
    "WINDOW_UPDATE on an idle stream": (window_update(7, 1), ErrorCode.PROTOCOL_ERROR),
    "RST_STREAM on an idle stream": (frame(RST_STREAM, 0, 7, b"\x00\x00\x00\x08"),
                                     ErrorCode.PROTOCOL_ERROR),
    "RST_STREAM of 3 bytes": (OPEN + frame(RST_STREAM, 0, 1, b"\x00\x00\x08"),
                              ErrorCode.FRAME_SIZE_ERROR),
    "RST_STREAM on stream 0": (frame(RST_STREAM, 0, 0, b"\x00\x00\x00\x08"),
                               ErrorCode.PROTOCOL_ERROR),
    "a frame over our MAX_FRAME_SIZE": (frame(DATA, 0, 1, b"x" * 16385),
                                        ErrorCode.FRAME_SIZE_ERROR),
    "DATA padding as long as the frame": (
        frame(HEADERS, END_HEADERS, 1, REQUEST) + frame(DATA, PADDED, 1, b"\x04abc"),
        ErrorCode.PROTOCOL_ERROR),
    "padded DATA without a pad length": (
        frame(HEADERS, END_HEADERS, 1, REQUEST) + frame(DATA, PADDED, 1),
        ErrorCode.FRAME_SIZE_ERROR),
    "HEADERS padding longer than the block": (
        frame(HEADERS, END_HEADERS | PADDED, 1, b"\x10" + REQUEST[:8]), ErrorCode.PROTOCOL_ERROR),
    "HEADERS too short for its priority": (frame(HEADERS, END_HEADERS | PRIORITY_FLAG, 1,
                                                 b"\x00\x00\x00"), ErrorCode.FRAME_SIZE_ERROR),
    "HPACK index 0": (frame(HEADERS, END_HEADERS, 1, b"\x80"), ErrorCode.COMPRESSION_ERROR),
    "HPACK index past the table": (frame(HEADERS, END_HEADERS, 1, b"\x83\xff\x10"),
                                   ErrorCode.COMPRESSION_ERROR),
    "HPACK block cut in a string": (frame(HEADERS, END_HEADERS, 1, b"\x83\x04\x05/x"),
                                    ErrorCode.COMPRESSION_ERROR),
}


@pytest.mark.parametrize("case", sorted(CONNECTION_ERRORS))
def test_a_connection_error(case: str) -> None:
    data, code = CONNECTION_ERRORS[case]
    assert connection_error(Peer.started(), data)[0] == code


def test_the_goaway_names_the_highest_stream() -> None:
    assert connection_error(Peer.started(), request(1) + request(7) + frame(DATA, 0, 0)) == (
        ErrorCode.PROTOCOL_ERROR, 7)


def test_a_wrong_preface() -> None:
    conn = ServerConnection()
    events = conn.receive(b"GET / HTTP/1.1\r\n")
    assert events == [ConnectionEnded(ErrorCode.PROTOCOL_ERROR, 0, False)]
    assert [f.kind for f in read_frames(conn.data_to_send())] == [SETTINGS, WINDOW_UPDATE, GOAWAY]
    conn = ServerConnection()
    assert conn.receive(PREFACE[:10]) == []
    assert conn.receive(PREFACE[10:20] + b"XXXX") == [
        ConnectionEnded(ErrorCode.PROTOCOL_ERROR, 0, False)]


def test_the_first_frame_must_be_settings() -> None:
    conn = ServerConnection()
    assert conn.receive(PREFACE + frame(PING, 0, 0, b"12345678")) == [
        ConnectionEnded(ErrorCode.PROTOCOL_ERROR, 0, False)]
    conn = ServerConnection()
    assert conn.receive(PREFACE + frame(SETTINGS, ACK, 0)) == [
        ConnectionEnded(ErrorCode.PROTOCOL_ERROR, 0, False)]


def test_data_beyond_the_connection_window() -> None:
    conn = ServerConnection(max_inbound_frame_size=100_000, connection_window_size=65_535)
    peer = Peer.started(conn)
    assert connection_error(peer, frame(HEADERS, END_HEADERS, 1, REQUEST)
                            + frame(DATA, 0, 1, b"x" * 65_536))[0] == ErrorCode.FLOW_CONTROL_ERROR


def test_the_peers_goaway() -> None:
    peer = Peer.started()
    events = peer.send(request(1) + frame(GOAWAY, 0, 0, b"\x00\x00\x00\x00\x00\x00\x00\x00dbg"))
    assert events[-1] == ConnectionEnded(ErrorCode.NO_ERROR, 0, True)
    peer.conn.send_unary(1, HEAD, MESSAGE, TRAILERS)  # the stream still finishes
    assert [f.kind for f in peer.frames()] == [HEADERS, DATA, HEADERS]


# -- stream errors --------------------------------------------------------------------------

STREAM_ERRORS = {
    "PRIORITY of 4 bytes": (frame(PRIORITY, 0, 1, b"\x00\x00\x00\x03"), 1,
                            ErrorCode.FRAME_SIZE_ERROR),
    "PRIORITY on itself": (frame(PRIORITY, 0, 1, b"\x00\x00\x00\x01\x10"), 1,
                           ErrorCode.PROTOCOL_ERROR),
    "HEADERS depending on itself": (
        frame(HEADERS, END_HEADERS | PRIORITY_FLAG, 3, b"\x00\x00\x00\x03\x10" + REQUEST), 3,
        ErrorCode.PROTOCOL_ERROR),
    "a request without :path": (frame(HEADERS, END_HEADERS, 3, b"\x83\x86"), 3,
                                ErrorCode.PROTOCOL_ERROR),
    "an uppercase field name": (frame(HEADERS, END_HEADERS, 3, REQUEST + b"\x00\x01A\x01b"), 3,
                                ErrorCode.PROTOCOL_ERROR),
    "a pseudo-header after a field": (frame(HEADERS, END_HEADERS, 3, b"\x83\x86\x00\x01a\x01b\x84"),
                                      3, ErrorCode.PROTOCOL_ERROR),
    "a connection field": (frame(HEADERS, END_HEADERS, 3, REQUEST + b"\x00\x0aconnection\x01x"), 3,
                           ErrorCode.PROTOCOL_ERROR),
    "te other than trailers": (frame(HEADERS, END_HEADERS, 3, REQUEST + b"\x00\x02te\x04gzip"), 3,
                               ErrorCode.PROTOCOL_ERROR),
    "a value with a line feed": (frame(HEADERS, END_HEADERS, 3, REQUEST + b"\x00\x01a\x03b\nc"),
                                 3, ErrorCode.PROTOCOL_ERROR),
    "a value ending in a space": (frame(HEADERS, END_HEADERS, 3, REQUEST + b"\x00\x01a\x02b "),
                                  3, ErrorCode.PROTOCOL_ERROR),
    "stream WINDOW_UPDATE of 0": (window_update(1, 0), 1, ErrorCode.PROTOCOL_ERROR),
    "stream window overflow": (window_update(1, 0x7FFF_FFFF), 1, ErrorCode.FLOW_CONTROL_ERROR),
    "trailers without END_STREAM": (frame(HEADERS, END_HEADERS, 1, b"\x00\x01a\x01b"), 1,
                                    ErrorCode.PROTOCOL_ERROR),
    "trailers with a pseudo-header": (frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\x88"), 1,
                                      ErrorCode.PROTOCOL_ERROR),
    "DATA beyond the stream window": (frame(DATA, 0, 1, b"x" * 65_536), 1,
                                      ErrorCode.FLOW_CONTROL_ERROR),
    "a content-length that is no number": (
        frame(HEADERS, END_HEADERS, 3, REQUEST + content_length("5x")), 3,
        ErrorCode.PROTOCOL_ERROR),
    "two different content-lengths": (
        frame(HEADERS, END_HEADERS, 3, REQUEST + content_length("5, 6")), 3,
        ErrorCode.PROTOCOL_ERROR),
    "a content-length and no body": (
        frame(HEADERS, END_HEADERS | END_STREAM, 3, REQUEST + content_length("5")), 3,
        ErrorCode.PROTOCOL_ERROR),
}


@pytest.mark.parametrize("case", sorted(STREAM_ERRORS))
def test_a_stream_error(case: str) -> None:
    data, stream, code = STREAM_ERRORS[case]
    peer = Peer.started(ServerConnection(initial_window_size=65_535,
                                         max_inbound_frame_size=100_000))
    assert peer.send(frame(HEADERS, END_HEADERS, 1, REQUEST)) == [
        RequestReceived(1, REQUEST_FIELDS, False)]
    events = peer.send(data)
    assert stream_error(peer, b"") == (stream, code)
    if stream == 1:  # the application knew it
        assert events[-1] == StreamReset(1, code)
        assert peer.conn.open_streams == 0
    else:
        assert not any(isinstance(e, RequestReceived) for e in events)


@pytest.mark.parametrize(("declared", "parts", "whole"), [
    ("5", [b"12345"], True), ("5, 5", [b"12", b"345"], True), ("0", [b""], True),
    ("5", [b"123456"], False), ("5", [b"1234"], False), ("5", [b"123", b"456"], False)])
def test_a_body_as_long_as_its_content_length(declared: str, parts: list[bytes],
                                              whole: bool) -> None:
    """Section 8.1.1: a request whose DATA differ from its content-length is malformed
    (Netty resets it with PROTOCOL_ERROR)."""
    peer = Peer.started()
    last = len(parts) - 1
    events = peer.send(frame(HEADERS, END_HEADERS, 1, REQUEST + content_length(declared))
                       + b"".join(frame(DATA, END_STREAM if i == last else 0, 1, part)
                                  for i, part in enumerate(parts)))
    if whole:
        assert events[-1] == DataReceived(1, parts[-1], True)
        assert not any(f.kind == RST_STREAM for f in peer.frames())
    else:
        assert events[-1] == StreamReset(1, ErrorCode.PROTOCOL_ERROR)
        assert [f for f in peer.frames() if f.kind == RST_STREAM] == [
            Frame(RST_STREAM, 0, 1, struct.pack(">I", ErrorCode.PROTOCOL_ERROR))]


def test_the_content_length_counts_no_padding_and_ends_at_the_trailers() -> None:
    peer = Peer.started()
    head = frame(HEADERS, END_HEADERS, 1, REQUEST + content_length("5"))
    padded = frame(DATA, PADDED | END_STREAM, 1, b"\x03" + b"12345" + b"\x00" * 3)
    assert peer.send(head + padded)[-1] == DataReceived(1, b"12345", True)
    trailers = frame(HEADERS, END_HEADERS | END_STREAM, 3, b"\x00\x01a\x01b")
    short = (frame(HEADERS, END_HEADERS, 3, REQUEST + content_length("5"))
             + frame(DATA, 0, 3, b"1234") + trailers)
    assert peer.send(short)[-1] == StreamReset(3, ErrorCode.PROTOCOL_ERROR)


def test_data_after_the_stream_ended() -> None:
    peer = Peer.started()
    peer.send(request(1) + request(3))
    assert peer.send(frame(DATA, 0, 1, b"late")) == [StreamReset(1, ErrorCode.STREAM_CLOSED)]
    assert stream_error(peer, b"") == (1, ErrorCode.STREAM_CLOSED)
    assert peer.conn.open_streams == 1
    peer.conn.send_unary(3, HEAD, MESSAGE, TRAILERS)
    peer.frames()
    assert stream_error(peer, frame(DATA, 0, 3, b"late")) == (3, ErrorCode.STREAM_CLOSED)
    assert peer.send(frame(DATA, 0, 3, b"later")) == []  # reset by us now: dropped
    assert peer.frames() == []


def test_more_streams_than_allowed_are_refused() -> None:
    peer = Peer.started(ServerConnection(max_concurrent_streams=2))
    events = peer.send(request(1) + request(3) + request(5))
    assert [e.stream_id for e in events if isinstance(e, RequestReceived)] == [1, 3]
    assert [(f.stream, word(f)) for f in peer.frames()] == [(5, ErrorCode.REFUSED_STREAM)]
    assert peer.send(frame(DATA, 0, 5, b"more") + request(7)) == []  # dropped, still full
    peer.conn.send_unary(1, HEAD, MESSAGE, TRAILERS)
    assert [f.stream for f in peer.frames()] == [7, 1, 1, 1]
    assert peer.send(request(9)) == [RequestReceived(9, REQUEST_FIELDS, False),
                                     DataReceived(9, MESSAGE, True)]


def test_the_peers_reset_stops_a_stream() -> None:
    peer = Peer.started()
    peer.send(frame(HEADERS, END_HEADERS, 1, REQUEST))
    assert peer.send(frame(RST_STREAM, 0, 1, b"\x00\x00\x00\x08")) == [
        StreamReset(1, ErrorCode.CANCEL)]
    peer.conn.send_unary(1, HEAD, MESSAGE, TRAILERS)  # a race with the reset: dropped
    peer.conn.send_data(1, b"x")
    peer.conn.send_headers(1, TRAILERS, end_stream=True)
    peer.conn.reset_stream(1, ErrorCode.CANCEL)
    assert peer.frames() == []
    assert peer.send(frame(RST_STREAM, 0, 1, b"\x00\x00\x00\x08") + window_update(1, 5)) == []
    assert peer.frames() == []
    with pytest.raises(H2Error):
        peer.conn.send_data(3, b"x")
    with pytest.raises(H2Error):
        peer.conn.send_headers(2, HEAD)


def test_sending_after_our_end_is_a_bug() -> None:
    peer = Peer.started()
    peer.send(frame(HEADERS, END_HEADERS, 1, REQUEST))
    peer.conn.send_headers(1, HEAD)
    peer.conn.send_data(1, MESSAGE, end_stream=True)
    assert [(f.kind, f.flags) for f in peer.frames()] == [
        (HEADERS, END_HEADERS), (DATA, END_STREAM), (RST_STREAM, 0)]  # NO_ERROR: client sends
    peer.send(frame(DATA, END_STREAM, 1, MESSAGE))  # after our reset: dropped
    assert peer.frames() == []
    assert peer.conn.open_streams == 0


def test_an_application_reset() -> None:
    peer = Peer.started()
    peer.send(frame(HEADERS, END_HEADERS, 1, REQUEST))
    peer.conn.reset_stream(1, ErrorCode.CANCEL)
    assert [(f.kind, f.stream, word(f)) for f in peer.frames()] == [
        (RST_STREAM, 1, ErrorCode.CANCEL)]
    assert peer.send(frame(DATA, END_STREAM, 1, MESSAGE)) == [] and peer.frames() == []


def test_priority_padding_and_unknown_frames() -> None:
    peer = Peer.started()
    padded = b"\x03" + b"\x80\x00\x00\x00\x20" + REQUEST + b"\x00" * 3
    events = peer.send(frame(PRIORITY, 0, 9, b"\x00\x00\x00\x00\x10")   # idle: fine
                       + frame(0xFA, 0x3, 1, b"ext") + frame(0xFA, 0, 0)
                       + frame(HEADERS, END_HEADERS | PADDED | PRIORITY_FLAG, 1, padded)
                       + frame(DATA, PADDED, 1, b"\x02ab\x00\x00")
                       + frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\x00\x01a\x01b"))
    assert events == [RequestReceived(1, REQUEST_FIELDS, False), DataReceived(1, b"ab", False),
                      DataReceived(1, b"", True)]
    assert peer.frames() == []


def test_padding_counts_against_flow_control() -> None:
    peer = Peer.started(ServerConnection(initial_window_size=65_535))
    peer.send(frame(HEADERS, END_HEADERS, 1, REQUEST))
    events = peer.send(frame(DATA, PADDED, 1, b"\xff" + b"\x00" * 255) * 128)  # 32,768 bytes
    assert len(events) == 128 and all(e == DataReceived(1, b"", False) for e in events)
    updates = [(f.stream, word(f)) for f in peer.frames()]
    assert updates == [(1, 32_768)]


# -- flow control on send -------------------------------------------------------------------


def data_of(frames: list[Frame]) -> list[tuple[int, int]]:
    return [(len(f.payload), f.flags) for f in frames if f.kind == DATA]


def test_data_waits_for_the_peers_window() -> None:
    peer = Peer.started(settings=setting(4, 10))
    peer.send(request(1))
    peer.conn.send_unary(1, HEAD, b"y" * 25, TRAILERS)
    frames = peer.frames()
    assert [f.kind for f in frames] == [HEADERS, DATA] and data_of(frames) == [(10, 0)]
    assert peer.conn.open_streams == 1
    peer.send(window_update(1, 10))
    assert data_of(peer.frames()) == [(10, 0)]
    peer.send(window_update(0, 1))  # the connection's window is not what holds it
    assert peer.frames() == []
    peer.send(window_update(1, 100))
    frames = peer.frames()
    assert [(f.kind, f.flags) for f in frames] == [(DATA, 0), (HEADERS, END_HEADERS | END_STREAM)]
    assert len(frames[0].payload) == 5 and peer.headers(frames)[-1][1] == [("grpc-status", "0")]
    assert peer.conn.open_streams == 0


def test_the_connection_window_is_shared_in_order() -> None:
    peer = Peer.started(settings=setting(4, 1 << 20))
    peer.send(request(1) + request(3))
    peer.conn.send_data(1, b"a" * 16384)
    peer.conn.send_data(1, b"a" * 16384)
    peer.conn.send_data(1, b"a" * 16384)
    peer.conn.send_data(1, b"a" * 16384, end_stream=True)  # 65,536 in all: one byte too many
    peer.conn.send_data(3, b"b" * 10, end_stream=True)
    assert sum(n for n, _ in data_of(peer.frames())) == 65_535
    peer.send(window_update(0, 5))
    frames = peer.frames()
    assert [(f.stream, len(f.payload), f.flags) for f in frames] == [
        (1, 1, END_STREAM), (3, 4, 0)]


def test_a_settings_change_moves_every_window() -> None:
    peer = Peer.started(settings=setting(4, 100))
    peer.send(request(1) + request(3))
    peer.conn.send_data(1, b"x" * 50)
    peer.conn.send_data(3, b"x" * 150, end_stream=True)
    assert data_of(peer.frames()) == [(50, 0), (100, 0)]
    peer.send(frame(SETTINGS, 0, 0, setting(4, 20)))  # 1: 20 - 50 = -30, 3: -80
    assert [f.kind for f in peer.frames()] == [SETTINGS]
    peer.conn.send_data(1, b"z" * 5)
    assert peer.frames() == []
    peer.send(window_update(1, 40) + window_update(3, 100))
    assert data_of(peer.frames()) == [(5, 0), (20, 0)]
    peer.send(frame(SETTINGS, 0, 0, setting(4, 1000)))
    assert data_of(peer.frames()) == [(30, END_STREAM)]  # 3: -80 + 100 + 980


def test_a_settings_increase_releases_data() -> None:
    peer = Peer.started(settings=setting(4, 0))
    peer.send(request(1))
    peer.conn.send_unary(1, HEAD, MESSAGE, TRAILERS)
    assert [f.kind for f in peer.frames()] == [HEADERS]
    peer.send(frame(SETTINGS, 0, 0, setting(4, 1000)))
    assert [(f.kind, f.flags) for f in peer.frames()] == [
        (SETTINGS, ACK), (DATA, 0), (HEADERS, END_HEADERS | END_STREAM)]


def test_max_frame_size_splits_data_and_header_blocks() -> None:
    peer = Peer.started(settings=setting(4, 1 << 20))
    peer.send(request(1) + window_update(0, 1 << 20))
    big = encode_headers([(":status", "200"), ("x-big", "v" * 40_000)])
    peer.conn.send_headers(1, big)
    peer.conn.send_data(1, b"d" * 40_000)
    peer.conn.send_headers(1, TRAILERS, end_stream=True)
    frames = peer.frames()
    assert [(f.kind, len(f.payload), f.flags) for f in frames] == [
        (HEADERS, 16384, 0), (CONTINUATION, 16384, 0),
        (CONTINUATION, len(big) - 32768, END_HEADERS),
        (DATA, 16384, 0), (DATA, 16384, 0), (DATA, 7232, 0),
        (HEADERS, len(TRAILERS), END_HEADERS | END_STREAM)]
    assert peer.headers(frames)[0][1][1] == ("x-big", "v" * 40_000)
    peer.send(request(3) + frame(SETTINGS, 0, 0, setting(5, 20_000)))
    peer.frames()
    peer.conn.send_data(3, b"d" * 40_000)
    assert data_of(peer.frames()) == [(20_000, 0), (20_000, 0)]


# -- flow control on receive ----------------------------------------------------------------


def test_a_long_stream_never_stalls() -> None:
    """A sender that respects the windows it was given sends 8 MiB on one stream."""
    peer = Peer.started(ServerConnection(initial_window_size=65_535,
                                         connection_window_size=100_000))
    stream_window, conn_window = 65_535, 100_000
    peer.send(frame(HEADERS, END_HEADERS, 1, REQUEST))
    received = 0
    chunk = b"x" * 16_384
    while received < 8 << 20:
        size = min(len(chunk), stream_window, conn_window)
        assert size > 0, "the sender stalled"
        events = peer.send(frame(DATA, 0, 1, chunk[:size]))
        assert events == [DataReceived(1, chunk[:size], False)]
        received += size
        stream_window -= size
        conn_window -= size
        for f in peer.frames():
            assert f.kind == WINDOW_UPDATE
            if f.stream:
                stream_window += word(f)
            else:
                conn_window += word(f)
    assert stream_window <= 65_535 and conn_window <= 100_000


def test_our_window_applies_once_acked() -> None:
    conn = ServerConnection(initial_window_size=100)
    conn.initiate()
    conn.receive(start() + frame(HEADERS, END_HEADERS, 1, REQUEST))
    conn.receive(frame(DATA, 0, 1, b"x" * 1000))  # the default 65,535 until the ACK
    conn.receive(frame(SETTINGS, ACK, 0))           # 100 - 65,535 from now: far below 0
    conn.data_to_send()
    assert conn.receive(frame(DATA, 0, 1, b"x")) == [StreamReset(1, ErrorCode.FLOW_CONTROL_ERROR)]


# -- going away ----------------------------------------------------------------------------


def test_a_graceful_goaway_refuses_later_streams() -> None:
    peer = Peer.started()
    peer.send(request(1) + request(3))
    peer.conn.goaway()
    goaway = peer.frames()
    assert [(f.kind, word(f), word(f, 4)) for f in goaway] == [(GOAWAY, 3, 0)]
    assert peer.send(request(5)) == []
    assert [(f.kind, f.stream, word(f)) for f in peer.frames()] == [
        (RST_STREAM, 5, ErrorCode.REFUSED_STREAM)]
    peer.conn.send_unary(1, HEAD, MESSAGE, TRAILERS)
    assert peer.conn.open_streams == 1
    peer.conn.send_unary(3, HEAD, MESSAGE, TRAILERS)
    assert peer.conn.open_streams == 0
    assert len(peer.frames()) == 6


def test_a_goaway_with_an_error_ends_the_connection() -> None:
    peer = Peer.started()
    peer.send(request(1))
    peer.conn.goaway(ErrorCode.INTERNAL_ERROR, b"bye")
    assert peer.frames() == [Frame(GOAWAY, 0, 0, b"\x00\x00\x00\x01\x00\x00\x00\x02bye")]
    assert peer.conn.closed and peer.send(request(3)) == []
    peer.conn.send_unary(1, HEAD, MESSAGE, TRAILERS)
    assert peer.frames() == []


def test_client_encoder_blocks_decode() -> None:
    """Blocks from a real HPACK encoder (Huffman, dynamic table) decode the same each time."""
    encoder = Encoder()
    peer = Peer.started()
    fields = [*REQUEST_FIELDS, ("te", "trailers"), ("x-client", "python")]
    events = peer.send(b"".join(frame(HEADERS, END_HEADERS | END_STREAM, s, encoder.encode(fields))
                                for s in (1, 3, 5)))
    assert [e.headers for e in events if isinstance(e, RequestReceived)] == [fields] * 3


def test_a_lower_header_table_size_is_signalled_once() -> None:
    peer = Peer.started(settings=setting(1, 0))  # the peer's decoder keeps no table
    peer.send(request(1) + request(3))
    peer.conn.send_unary(1, HEAD, MESSAGE, TRAILERS)
    peer.conn.send_unary(3, HEAD, MESSAGE, TRAILERS)
    frames = peer.frames()
    assert frames[0].payload == b"\x20" + HEAD  # a size update to 0 first, then the block
    assert [f.payload for f in frames if f.kind == HEADERS][1:] == [TRAILERS, HEAD, TRAILERS]
    peer.decoder.max_allowed_table_size = 0
    assert [fields for _, fields, _ in peer.headers(frames)][:2] == [
        [(":status", "200"), ("content-type", "application/grpc")], [("grpc-status", "0")]]


# -- any input ------------------------------------------------------------------------------

_streams = st.sampled_from([0, 1, 3, 5, 7, 2])
_flags = st.sampled_from([0, END_STREAM, END_HEADERS, END_HEADERS | END_STREAM, PADDED, ACK])
_frames = st.lists(st.one_of(
    st.tuples(st.integers(0, 10), st.integers(0, 255), st.integers(0, 9), st.binary(max_size=40)),
    st.tuples(st.just(HEADERS), _flags, _streams, st.sampled_from([REQUEST, REQUEST[:5], b""])),
    st.tuples(st.just(CONTINUATION), _flags, _streams, st.sampled_from([REQUEST, b"\x88"])),
    st.tuples(st.just(DATA), _flags, _streams, st.binary(max_size=40)),
    st.tuples(st.just(WINDOW_UPDATE), st.just(0), _streams,
              st.integers(0, 2**31 - 1).map(lambda n: struct.pack(">I", n))),
    st.tuples(st.just(SETTINGS), st.sampled_from([0, ACK]), st.just(0),
              st.lists(st.tuples(st.integers(1, 7), st.integers(0, 2**32 - 1)), max_size=3)
              .map(lambda pairs: b"".join(setting(k, v) for k, v in pairs))),
    st.tuples(st.just(RST_STREAM), st.just(0), _streams, st.just(b"\x00\x00\x00\x08"))),
    max_size=30)


@settings(max_examples=300, deadline=None)
@given(frames=_frames, cut=st.integers(0, 2000), window=st.sampled_from([0, 10, 65_535]))
def test_any_frames_never_raise(frames: list[tuple[int, int, int, bytes]], cut: int,
                                window: int) -> None:
    """Peer input never raises, what we send is whole frames, and after a connection error
    nothing more happens."""
    peer = Peer.started(settings=setting(4, window))
    data = request(1) + b"".join(frame(kind, flags, stream, payload)
                                 for kind, flags, stream, payload in frames)
    events = peer.send(data[:cut]) + peer.send(data[cut:])
    for stream in (1, 3, 5):
        with contextlib.suppress(H2Error):
            peer.conn.send_unary(stream, HEAD, b"x" * 30, TRAILERS)
    peer.send(window_update(0, 100) + window_update(1, 100))
    read_frames(peer.conn.data_to_send())
    ended = [e for e in events if isinstance(e, ConnectionEnded) and not e.by_peer]
    assert len(ended) <= 1
    if ended:
        assert events[-1] is ended[0] and peer.conn.closed and peer.conn.open_streams == 0
        assert peer.send(request(99)) == [] and peer.conn.data_to_send() == b""


def test_values_that_are_not_utf8_arrive_intact() -> None:
    peer = Peer.started()
    events = peer.send(frame(HEADERS, END_HEADERS | END_STREAM, 1,
                             REQUEST + b"\x00\x01a\x03\xff\xfeb"))
    assert isinstance(events[0], RequestReceived)
    value = events[0].headers[-1][1]
    assert value.encode("utf-8", "surrogateescape") == b"\xff\xfeb"

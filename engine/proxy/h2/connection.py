"""A sans-IO HTTP/2 server connection (RFC 9113; h2c with prior knowledge, TLS outside):
bytes in, events out, frames queued for the caller to write.

How this works:

* `receive(data)` parses as many whole frames as `data` (plus what was left over) holds, in
  one loop that reads each 9-byte header with one struct and dispatches DATA and HEADERS
  first. Peer input never raises: a connection error queues GOAWAY, reports
  `ConnectionEnded` and makes the connection ignore everything after; a stream error queues
  RST_STREAM (and reports `StreamReset` if the application knew the stream).
* Header blocks are decoded by `decoding.BlockDecoder` (with its cache of all-indexed
  blocks); what we send, and the send-side flow control, is `sending.StreamSender`'s, which
  this class extends with the receiving half.
* Receive flow control: we advertise `initial_window_size` per stream and
  `connection_window_size` for the connection, and give credit back as data arrives (a
  WINDOW_UPDATE once half a window is used), so the peer never stalls; there is no
  back-pressure on the application.
* Frames a peer still sends on streams we reset are dropped quietly (DATA still counted in
  the connection window).
"""

from __future__ import annotations

from typing import Final

from engine.proxy.h2.decoding import BlockDecoder
from engine.proxy.h2.events import (
    ConnectionEnded,
    ConnectionFailure,
    DataReceived,
    Event,
    H2Error,
    PingAcknowledged,
    RequestReceived,
    StreamReset,
)
from engine.proxy.h2.fields import content_length, trailers_are_malformed
from engine.proxy.h2.frames import (
    ACK,
    CONTINUATION,
    DATA,
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_WINDOW,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    GOAWAY_HEAD,
    HEADER,
    HEADERS,
    LARGEST_MAX_FRAME_SIZE,
    MAX_WINDOW,
    PADDED,
    PING,
    PREFACE,
    PRIORITY,
    PRIORITY_FLAG,
    PUSH_PROMISE,
    RST_STREAM,
    SETTING,
    SETTINGS,
    STREAM_ID_MASK,
    WINDOW_UPDATE,
    WORD,
    ErrorCode,
    Setting,
    encode_frame,
    encode_goaway,
    encode_rst_stream,
    encode_settings,
    encode_window_update,
)
from engine.proxy.h2.sending import Stream, StreamSender

__all__ = [
    "ConnectionEnded",
    "DataReceived",
    "Event",
    "H2Error",
    "PingAcknowledged",
    "RequestReceived",
    "ServerConnection",
    "StreamReset",
]

#: An unfinished header block longer than this many times max_header_list_size is a flood.
_BLOCK_SLACK: Final = 2


class ServerConnection(StreamSender):
    """The server side of one HTTP/2 connection, without I/O.

    Args:
        max_concurrent_streams: SETTINGS_MAX_CONCURRENT_STREAMS we advertise and enforce
            (a stream beyond it is refused with RST_STREAM REFUSED_STREAM).
        max_header_list_size: SETTINGS_MAX_HEADER_LIST_SIZE, enforced when decoding.
        initial_window_size: SETTINGS_INITIAL_WINDOW_SIZE we advertise (receive window of
            each stream).
        max_inbound_frame_size: SETTINGS_MAX_FRAME_SIZE we advertise; larger frames are a
            connection FRAME_SIZE_ERROR.
        connection_window_size: the connection's receive window (a WINDOW_UPDATE on stream 0
            raises it from 65,535 at `initiate`).
    """

    def __init__(self, *, max_concurrent_streams: int = 1000,
                 max_header_list_size: int = 16 * 1024,
                 initial_window_size: int = 1 << 20,
                 max_inbound_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                 connection_window_size: int = 16 << 20) -> None:
        if not 0 <= initial_window_size <= MAX_WINDOW:
            raise ValueError(f"initial_window_size {initial_window_size} out of range")
        if not DEFAULT_WINDOW <= connection_window_size <= MAX_WINDOW:
            raise ValueError(f"connection_window_size {connection_window_size} out of range")
        if not DEFAULT_MAX_FRAME_SIZE <= max_inbound_frame_size <= LARGEST_MAX_FRAME_SIZE:
            raise ValueError(f"max_inbound_frame_size {max_inbound_frame_size} out of range")
        super().__init__()
        self._max_streams = max_concurrent_streams
        self._max_header_list = max_header_list_size
        self._initial_window = initial_window_size
        self._max_in = max_inbound_frame_size
        self._conn_window = connection_window_size
        self._decoder = BlockDecoder(max_header_list_size)
        self._rest = b""
        self._preface_left = PREFACE
        self._initiated = False
        self._peer_settings_seen = False
        self._settings_unacked = False
        self._goaway_last: int | None = None     # last-stream-id of our graceful GOAWAY
        # Header block in progress (HEADERS without END_HEADERS): stream, flags, parts, size.
        self._cont_id = 0
        self._cont_flags = 0
        self._cont_parts: list[bytes] = []
        self._cont_size = 0
        self._cont_bad_priority = False
        # Receive side: windows left, and what a stream's window is when it opens.
        self._conn_recv = connection_window_size
        self._recv_initial = DEFAULT_WINDOW  # ours once the peer ACKs our SETTINGS

    # -- starting and ending ---------------------------------------------------------------

    def initiate(self) -> None:
        """Queue our SETTINGS (and the connection WINDOW_UPDATE): the server preface."""
        if self._initiated:
            return
        self._initiated = True
        values = [(Setting.MAX_CONCURRENT_STREAMS, self._max_streams),
                  (Setting.INITIAL_WINDOW_SIZE, self._initial_window),
                  (Setting.MAX_HEADER_LIST_SIZE, self._max_header_list)]
        if self._max_in != DEFAULT_MAX_FRAME_SIZE:
            values.append((Setting.MAX_FRAME_SIZE, self._max_in))
        self._out.append(encode_settings(values))
        self._settings_unacked = True
        if self._conn_window > DEFAULT_WINDOW:
            self._out.append(encode_window_update(0, self._conn_window - DEFAULT_WINDOW))

    def ping(self, opaque: bytes = b"keepaliv") -> None:
        """Queue a PING carrying `opaque` (8 bytes); the peer's ACK is a `PingAcknowledged`."""
        if not self._closed:
            self._out.append(encode_frame(PING, 0, 0, opaque))

    def goaway(self, error_code: int = 0, debug: bytes = b"") -> None:
        """Queue a GOAWAY whose last-stream-id is the highest stream the peer opened.

        With NO_ERROR the connection drains: open streams go on, streams opened after are
        refused (RST_STREAM REFUSED_STREAM). With an error, the connection ends here.
        """
        if self._closed:
            return
        self.initiate()
        self._out.append(encode_goaway(self._highest, error_code, debug))
        if error_code:
            self._end()
        else:
            self._goaway_last = self._highest

    # -- receiving -------------------------------------------------------------------------

    def receive(self, data: bytes) -> list[Event]:
        """Take bytes from the peer; return what happened, in order.

        Never raises on peer input: protocol errors become RST_STREAM or GOAWAY frames in
        `data_to_send()` and `StreamReset` / `ConnectionEnded` events.
        """
        events: list[Event] = []
        if self._closed:
            return events
        if not self._initiated:
            self.initiate()
        if self._preface_left:
            data = self._take_preface(data, events)
            if not data:
                return events
        if self._rest:
            data = self._rest + data
        pos = 0
        end = len(data)
        unpack = HEADER.unpack_from
        try:
            while end - pos >= 9:
                length_kind, flags, sid = unpack(data, pos)
                length = length_kind >> 8
                if length > self._max_in:
                    raise ConnectionFailure(ErrorCode.FRAME_SIZE_ERROR, f"frame of {length} bytes")
                start = pos + 9
                if end - start < length:
                    break
                pos = start + length
                kind = length_kind & 0xFF
                sid &= STREAM_ID_MASK
                if not self._peer_settings_seen and kind != SETTINGS:
                    raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "first frame not SETTINGS")
                if self._cont_id:
                    if kind != CONTINUATION or sid != self._cont_id:
                        raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR,
                                                "header block interrupted")
                    self._on_continuation(events, flags, data[start:pos])
                elif kind == DATA:
                    self._on_data(events, flags, sid, data, start, length)
                elif kind == HEADERS:
                    self._on_headers(events, flags, sid, data[start:pos])
                else:
                    self._on_other(events, kind, flags, sid, data[start:pos])
        except ConnectionFailure as failure:
            self._fail(events, failure.code, str(failure))
            return events
        self._rest = data[pos:] if pos < end else b""
        return events

    def _take_preface(self, data: bytes, events: list[Event]) -> bytes:
        expected = self._preface_left
        got = data[:len(expected)]
        if not expected.startswith(got):
            self._fail(events, ErrorCode.PROTOCOL_ERROR, "bad client preface")
            return b""
        self._preface_left = expected[len(got):]
        return data[len(got):]

    def _fail(self, events: list[Event], code: int, debug: str) -> None:
        """A connection error: queue GOAWAY, report it, ignore everything after."""
        self._out.append(encode_goaway(self._highest, code, debug.encode()))
        self._end()
        events.append(ConnectionEnded(code, self._highest, False))

    def _end(self) -> None:
        """The connection is over: every stream is gone, sends are dropped."""
        self._closed = True
        self._streams.clear()
        self._blocked.clear()
        self._rest = b""

    def _stream_error(self, events: list[Event], sid: int, code: int) -> None:
        """RST_STREAM `sid`; a stream the application knows is reported and forgotten."""
        self._out.append(encode_rst_stream(sid, code))
        stream = self._streams.get(sid)
        if stream is not None:
            self._forget(stream, reset=True)
            events.append(StreamReset(sid, code))
        else:
            self._remember_reset(sid)

    def _is_idle(self, sid: int) -> bool:
        return sid > self._highest or not sid & 1

    def _on_data(self, events: list[Event], flags: int, sid: int, data: bytes, start: int,
                 length: int) -> None:
        if not sid:
            raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "DATA on stream 0")
        stop = start + length
        if flags & PADDED:
            if not length:
                raise ConnectionFailure(ErrorCode.FRAME_SIZE_ERROR,
                                        "padded DATA without pad length")
            pad = data[start]
            if pad >= length:
                raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "DATA padding too long")
            start += 1
            stop -= pad
        if length > self._conn_recv:
            raise ConnectionFailure(ErrorCode.FLOW_CONTROL_ERROR, "connection window exceeded")
        self._conn_recv -= length
        if self._conn_recv <= self._conn_window >> 1:
            self._out.append(encode_window_update(0, self._conn_window - self._conn_recv))
            self._conn_recv = self._conn_window
        stream = self._streams.get(sid)
        if stream is None:
            if self._is_idle(sid):
                raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, f"DATA on idle stream {sid}")
            if sid not in self._reset_by_us:
                self._stream_error(events, sid, ErrorCode.STREAM_CLOSED)
            return
        if not stream.remote_open:
            self._stream_error(events, sid, ErrorCode.STREAM_CLOSED)
            return
        if length > stream.recv_window:
            self._stream_error(events, sid, ErrorCode.FLOW_CONTROL_ERROR)
            return
        if stream.content_left is not None:  # the body must be as long as declared
            stream.content_left -= stop - start
            if stream.content_left < 0 or (flags & END_STREAM and stream.content_left):
                self._stream_error(events, sid, ErrorCode.PROTOCOL_ERROR)
                return
        if flags & END_STREAM:
            stream.remote_open = False
            events.append(DataReceived(sid, data[start:stop], True))
            return
        stream.recv_window -= length
        if stream.recv_window <= self._recv_initial >> 1:
            self._out.append(encode_window_update(sid, self._recv_initial - stream.recv_window))
            stream.recv_window = self._recv_initial
        events.append(DataReceived(sid, data[start:stop], False))

    def _on_headers(self, events: list[Event], flags: int, sid: int, payload: bytes) -> None:
        if not sid:
            raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "HEADERS on stream 0")
        if not sid & 1:
            raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, f"HEADERS on even stream {sid}")
        bad_priority = False
        if flags & (PADDED | PRIORITY_FLAG):
            start = (1 if flags & PADDED else 0) + (5 if flags & PRIORITY_FLAG else 0)
            stop = len(payload)
            if stop < start:
                raise ConnectionFailure(ErrorCode.FRAME_SIZE_ERROR, "HEADERS too short")
            if flags & PADDED:
                stop -= payload[0]
            if stop < start:
                raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "HEADERS padding too long")
            if flags & PRIORITY_FLAG:
                bad_priority = WORD.unpack_from(payload, start - 5)[0] & STREAM_ID_MASK == sid
            payload = payload[start:stop]
        if flags & END_HEADERS:
            self._on_header_block(events, flags, sid, payload, bad_priority)
            return
        if len(payload) > self._max_header_list * _BLOCK_SLACK:
            raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "header block too large")
        self._cont_id = sid
        self._cont_flags = flags
        self._cont_parts = [payload]
        self._cont_size = len(payload)
        self._cont_bad_priority = bad_priority

    def _on_continuation(self, events: list[Event], flags: int, payload: bytes) -> None:
        self._cont_size += len(payload)
        if self._cont_size > self._max_header_list * _BLOCK_SLACK:
            raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "header block too large")
        self._cont_parts.append(payload)
        if flags & END_HEADERS:
            sid = self._cont_id
            block = b"".join(self._cont_parts)
            self._cont_id = 0
            self._cont_parts = []
            self._on_header_block(events, self._cont_flags, sid, block, self._cont_bad_priority)

    def _on_header_block(self, events: list[Event], flags: int, sid: int, block: bytes,
                         bad_priority: bool) -> None:
        headers, malformed = self._decoder.decode(block)  # always: the decoder's table must follow
        stream = self._streams.get(sid)
        if stream is not None:  # trailers
            if not stream.remote_open:
                self._stream_error(events, sid, ErrorCode.STREAM_CLOSED)
            elif (not flags & END_STREAM or bad_priority or trailers_are_malformed(headers)
                  or stream.content_left):
                self._stream_error(events, sid, ErrorCode.PROTOCOL_ERROR)
            else:
                stream.remote_open = False
                events.append(DataReceived(sid, b"", True))
            return
        if sid <= self._highest:
            if sid in self._reset_by_us:
                return
            # a new stream id must exceed every earlier one (RFC 9113 section 5.1.1)
            raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, f"HEADERS on closed stream {sid}")
        self._highest = sid
        if self._goaway_last is not None or len(self._streams) >= self._max_streams:
            self._stream_error(events, sid, ErrorCode.REFUSED_STREAM)
            return
        end_stream = bool(flags & END_STREAM)
        declared = content_length(headers)
        if malformed or bad_priority or declared == -1 or (end_stream and declared):
            self._stream_error(events, sid, ErrorCode.PROTOCOL_ERROR)
            return
        stream = self._streams[sid] = Stream(sid, self._peer_initial, self._recv_initial)
        stream.content_left = declared
        stream.remote_open = not end_stream
        events.append(RequestReceived(sid, headers, end_stream))

    def _on_other(self, events: list[Event], kind: int, flags: int, sid: int,
                  payload: bytes) -> None:
        if kind == WINDOW_UPDATE:
            self._on_window_update(events, sid, payload)
        elif kind == SETTINGS:
            self._on_settings(flags, sid, payload)
        elif kind == PING:
            if sid:
                raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "PING on a stream")
            if len(payload) != 8:
                raise ConnectionFailure(ErrorCode.FRAME_SIZE_ERROR, "PING not 8 bytes")
            if not flags & ACK:
                self._out.append(encode_frame(PING, ACK, 0, payload))
            else:
                events.append(PingAcknowledged(payload))
        elif kind == RST_STREAM:
            self._on_rst_stream(events, sid, payload)
        elif kind == PRIORITY:
            if not sid:
                raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "PRIORITY on stream 0")
            if len(payload) != 5:
                self._stream_error(events, sid, ErrorCode.FRAME_SIZE_ERROR)
            elif WORD.unpack_from(payload)[0] & STREAM_ID_MASK == sid:
                self._stream_error(events, sid, ErrorCode.PROTOCOL_ERROR)
        elif kind == GOAWAY:
            if sid:
                raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "GOAWAY on a stream")
            if len(payload) < 8:
                raise ConnectionFailure(ErrorCode.FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes")
            last, code = GOAWAY_HEAD.unpack_from(payload)
            events.append(ConnectionEnded(code, last & STREAM_ID_MASK, True))
        elif kind == CONTINUATION:
            raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "CONTINUATION without a header block")
        elif kind == PUSH_PROMISE:
            raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "PUSH_PROMISE from a client")
        # any other type is an extension we do not know: ignored (RFC 9113 section 5.5)

    def _on_settings(self, flags: int, sid: int, payload: bytes) -> None:
        if sid:
            raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & ACK:
            if payload:
                raise ConnectionFailure(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload")
            if not self._peer_settings_seen:
                raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "first frame not SETTINGS")
            if self._settings_unacked:  # our initial window now applies (section 6.9.2)
                self._settings_unacked = False
                delta = self._initial_window - self._recv_initial
                self._recv_initial = self._initial_window
                for stream in self._streams.values():
                    stream.recv_window += delta
            return
        if len(payload) % 6:
            raise ConnectionFailure(ErrorCode.FRAME_SIZE_ERROR,
                                    "SETTINGS length not a multiple of 6")
        self._peer_settings_seen = True
        grew = False
        for ident, value in SETTING.iter_unpack(payload):
            if ident == Setting.HEADER_TABLE_SIZE:
                self.peer_table_size(value)
            elif ident == Setting.ENABLE_PUSH:
                if value > 1:
                    raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "ENABLE_PUSH not 0 or 1")
            elif ident == Setting.INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    raise ConnectionFailure(ErrorCode.FLOW_CONTROL_ERROR,
                                            "INITIAL_WINDOW_SIZE too large")
                delta = value - self._peer_initial
                self._peer_initial = value
                grew = grew or delta > 0
                for stream in self._streams.values():
                    stream.send_window += delta
                    if stream.send_window > MAX_WINDOW:
                        raise ConnectionFailure(ErrorCode.FLOW_CONTROL_ERROR,
                                                "stream window overflow")
            elif ident == Setting.MAX_FRAME_SIZE:
                if not DEFAULT_MAX_FRAME_SIZE <= value <= LARGEST_MAX_FRAME_SIZE:
                    raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "MAX_FRAME_SIZE out of range")
                self._peer_max_frame = value
            # MAX_CONCURRENT_STREAMS and MAX_HEADER_LIST_SIZE only advise a server that
            # opens no streams; unknown ids are ignored (section 6.5.2).
        self._out.append(encode_frame(SETTINGS, ACK, 0))
        if grew and self._blocked:
            self.flush_blocked()

    def _on_window_update(self, events: list[Event], sid: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise ConnectionFailure(ErrorCode.FRAME_SIZE_ERROR, "WINDOW_UPDATE not 4 bytes")
        increment = WORD.unpack(payload)[0] & STREAM_ID_MASK
        if not sid:
            if not increment:
                raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "connection WINDOW_UPDATE of 0")
            self._conn_send += increment
            if self._conn_send > MAX_WINDOW:
                raise ConnectionFailure(ErrorCode.FLOW_CONTROL_ERROR, "connection window overflow")
            if self._blocked:
                self.flush_blocked()
            return
        stream = self._streams.get(sid)
        if stream is None:
            if self._is_idle(sid):
                raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR,
                                        f"WINDOW_UPDATE on idle stream {sid}")
            return  # closed: a late update
        if not increment:
            self._stream_error(events, sid, ErrorCode.PROTOCOL_ERROR)
            return
        stream.send_window += increment
        if stream.send_window > MAX_WINDOW:
            self._stream_error(events, sid, ErrorCode.FLOW_CONTROL_ERROR)
        elif stream.pending and stream.send_window > 0 and self._conn_send > 0:
            self._flush(stream)

    def _on_rst_stream(self, events: list[Event], sid: int, payload: bytes) -> None:
        if not sid:
            raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, "RST_STREAM on stream 0")
        if len(payload) != 4:
            raise ConnectionFailure(ErrorCode.FRAME_SIZE_ERROR, "RST_STREAM not 4 bytes")
        stream = self._streams.get(sid)
        if stream is None:
            if self._is_idle(sid):
                raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR,
                                        f"RST_STREAM on idle stream {sid}")
            return
        self._forget(stream, reset=False)
        events.append(StreamReset(sid, WORD.unpack(payload)[0]))

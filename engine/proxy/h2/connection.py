"""A sans-IO HTTP/2 server connection (RFC 9113; h2c with prior knowledge, TLS outside):
bytes in, events out, frames queued for the caller to write.

How this works:

* `receive(data)` parses as many whole frames as `data` (plus what was left over) holds, in
  one loop that reads each 9-byte header with one struct and dispatches DATA and HEADERS
  first. Peer input never raises: a connection error queues GOAWAY, reports
  `ConnectionEnded` and makes the connection ignore everything after; a stream error queues
  RST_STREAM (and reports `StreamReset` if the application knew the stream).
* Header blocks are decoded by `hpack.Decoder`. A block made only of one-byte indexed fields
  cannot change the dynamic table, so its decoded list is cached by its bytes; any other
  block may change the table, and clears the cache when decoded.
* Receive flow control: we advertise `initial_window_size` per stream and
  `connection_window_size` for the connection, and give credit back as data arrives (a
  WINDOW_UPDATE once half a window is used), so the peer never stalls; there is no
  back-pressure on the application.
* Send flow control: DATA that the peer's windows do not admit waits per stream, with
  anything queued after it (trailers), and goes out from `receive` as WINDOW_UPDATE or
  SETTINGS open the windows. Streams we finished sending on while the client still sends are
  reset with NO_ERROR (RFC 9113 section 8.1) so they close.
* Streams we reset are remembered (a bounded set) so the frames a peer still sends on them
  are dropped quietly (DATA still counted in the connection window).
"""

from __future__ import annotations

from typing import Final, cast

from hpack import Decoder
from hpack.exceptions import HPACKError, OversizedHeaderListError

from engine.proxy.h2.events import (
    ConnectionEnded,
    DataReceived,
    Event,
    H2Error,
    Headers,
    RequestReceived,
    StreamReset,
)
from engine.proxy.h2.fields import request_is_malformed, trailers_are_malformed
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

__all__ = [
    "ConnectionEnded",
    "DataReceived",
    "Event",
    "H2Error",
    "RequestReceived",
    "ServerConnection",
    "StreamReset",
]

_pack = HEADER.pack
#: At most this many decoded all-indexed blocks are kept (a client sends few distinct ones).
_CACHE_LIMIT: Final = 512
#: At most this many ids of streams we reset are remembered.
_RESET_MEMORY: Final = 4096
#: An unfinished header block longer than this many times max_header_list_size is a flood.
_BLOCK_SLACK: Final = 2


class _Failed(Exception):
    """Internal: a connection error with its code (never leaves `receive`)."""

    def __init__(self, code: ErrorCode, debug: str) -> None:
        super().__init__(debug)
        self.code = code


class _Stream:
    """One stream's mutable state while it is open or half-closed."""

    __slots__ = ("id", "local_open", "pending", "recv_window", "remote_open", "send_window")

    def __init__(self, stream_id: int, send_window: int, recv_window: int) -> None:
        self.id = stream_id
        self.remote_open = True   # the peer may still send (no END_STREAM from it yet)
        self.local_open = True    # the application may still send (no end_stream asked)
        self.send_window = send_window
        self.recv_window = recv_window
        #: Frames waiting for the peer's window: (DATA or HEADERS, payload, end_stream).
        self.pending: list[tuple[int, bytes, bool]] = []


class ServerConnection:
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
        self._max_streams = max_concurrent_streams
        self._max_header_list = max_header_list_size
        self._initial_window = initial_window_size
        self._max_in = max_inbound_frame_size
        self._conn_window = connection_window_size
        self._decoder = Decoder(max_header_list_size)
        self._cache: dict[bytes, tuple[Headers, bool]] = {}
        self._out: list[bytes] = []
        self._rest = b""
        self._preface_left = PREFACE
        self._initiated = False
        self._closed = False
        self._peer_settings_seen = False
        self._settings_unacked = False
        self._streams: dict[int, _Stream] = {}
        self._blocked: dict[int, _Stream] = {}   # streams with pending frames, in order
        self._reset_by_us: dict[int, None] = {}  # an ordered, bounded set
        self._highest = 0                        # the highest stream id the peer opened
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
        # Send side: the peer's settings and the connection window.
        self._peer_initial = DEFAULT_WINDOW
        self._peer_max_frame = DEFAULT_MAX_FRAME_SIZE
        self._conn_send = DEFAULT_WINDOW

    # -- queries ---------------------------------------------------------------------------

    @property
    def open_streams(self) -> int:
        """Streams not yet closed (open or half-closed), for draining after GOAWAY."""
        return len(self._streams)

    @property
    def closed(self) -> bool:
        """True after a connection error or a GOAWAY with an error: nothing more happens."""
        return self._closed

    def data_to_send(self) -> bytes:
        """The bytes queued since the last call (b"" if none)."""
        if not self._out:
            return b""
        out = b"".join(self._out)
        self._out.clear()
        return out

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

    # -- sending ---------------------------------------------------------------------------

    def _sendable(self, stream_id: int) -> _Stream | None:
        """The stream to send on; None if it is gone (reset or closed): the send is dropped.

        Raises:
            H2Error: the peer never opened `stream_id`, or we already ended our side of it.
        """
        stream = self._streams.get(stream_id)
        if stream is not None:
            if not stream.local_open:
                raise H2Error(f"stream {stream_id}: already ended on our side")
            return stream
        if self._closed or (stream_id & 1 and 0 < stream_id <= self._highest):
            return None
        raise H2Error(f"stream {stream_id} was never opened by the peer")

    def send_headers(self, stream_id: int, block: bytes, end_stream: bool = False) -> None:
        """Queue a header block (HPACK, see `frames.encode_headers`): the response head, or
        trailers with `end_stream`. Split into HEADERS + CONTINUATION if the peer's
        SETTINGS_MAX_FRAME_SIZE requires it; kept behind DATA that waits for a window."""
        stream = self._sendable(stream_id)
        if stream is None:
            return
        if end_stream:
            stream.local_open = False
        if stream.pending:
            stream.pending.append((HEADERS, block, end_stream))
            return
        self._write_headers(stream, block, end_stream)

    def send_data(self, stream_id: int, data: bytes, end_stream: bool = False) -> None:
        """Queue DATA: what the peer's windows admit now, in frames of at most its
        SETTINGS_MAX_FRAME_SIZE; the rest waits for WINDOW_UPDATE."""
        stream = self._sendable(stream_id)
        if stream is None:
            return
        if end_stream:
            stream.local_open = False
        if stream.pending:
            stream.pending.append((DATA, data, end_stream))
            return
        self._write_data(stream, data, end_stream)

    def send_unary(self, stream_id: int, head: bytes, message: bytes, trailers: bytes) -> None:
        """A whole response: HEADERS `head`, DATA `message`, HEADERS `trailers` with
        END_STREAM; in one piece when the windows admit the message (the usual case)."""
        stream = self._streams.get(stream_id)
        size = len(message)
        limit = self._peer_max_frame
        if (stream is None or not stream.local_open or stream.pending
                or size > stream.send_window or size > self._conn_send or size > limit
                or len(head) > limit or len(trailers) > limit):
            self.send_headers(stream_id, head)
            self.send_data(stream_id, message)
            self.send_headers(stream_id, trailers, end_stream=True)
            return
        stream.local_open = False
        stream.send_window -= size
        self._conn_send -= size
        self._out.append(b"".join((
            _pack(len(head) << 8 | HEADERS, END_HEADERS, stream_id), head,
            _pack(size << 8 | DATA, 0, stream_id), message,
            _pack(len(trailers) << 8 | HEADERS, END_HEADERS | END_STREAM, stream_id), trailers)))
        self._ended_locally(stream)

    def reset_stream(self, stream_id: int, error_code: int) -> None:
        """Queue RST_STREAM and forget the stream (no event); a gone stream is ignored."""
        stream = self._streams.get(stream_id)
        if stream is None:
            if self._closed or (stream_id & 1 and 0 < stream_id <= self._highest):
                return
            raise H2Error(f"stream {stream_id} was never opened by the peer")
        self._out.append(encode_rst_stream(stream_id, error_code))
        self._forget(stream, reset=True)

    def _write_headers(self, stream: _Stream, block: bytes, end_stream: bool) -> None:
        limit = self._peer_max_frame
        flags = END_STREAM if end_stream else 0
        sid = stream.id
        if len(block) <= limit:
            self._out.append(_pack(len(block) << 8 | HEADERS, flags | END_HEADERS, sid) + block)
        else:
            parts = [block[i:i + limit] for i in range(0, len(block), limit)]
            frames = [encode_frame(HEADERS, flags, sid, parts[0])]
            frames += [encode_frame(CONTINUATION, 0, sid, part) for part in parts[1:-1]]
            frames.append(encode_frame(CONTINUATION, END_HEADERS, sid, parts[-1]))
            self._out.append(b"".join(frames))
        if end_stream:
            self._ended_locally(stream)

    def _write_data(self, stream: _Stream, data: bytes, end_stream: bool) -> bool:
        """Write what the windows admit; queue the rest first in line. True if all went."""
        size = len(data)
        sid = stream.id
        if not size or (size <= stream.send_window and size <= self._conn_send
                        and size <= self._peer_max_frame):
            stream.send_window -= size
            self._conn_send -= size
            self._out.append(_pack(size << 8 | DATA, END_STREAM if end_stream else 0, sid) + data)
            if end_stream:
                self._ended_locally(stream)
            return True
        pos = 0
        while pos < size:
            room = min(stream.send_window, self._conn_send, self._peer_max_frame)
            if room <= 0:
                break
            chunk = data[pos:pos + room]
            pos += len(chunk)
            stream.send_window -= len(chunk)
            self._conn_send -= len(chunk)
            last = end_stream and pos == size
            self._out.append(encode_frame(DATA, END_STREAM if last else 0, sid, chunk))
        if pos < size:
            stream.pending.insert(0, (DATA, data[pos:], end_stream))
            self._blocked[sid] = stream
            return False
        if end_stream:
            self._ended_locally(stream)
        return True

    def _flush(self, stream: _Stream) -> bool:
        """Write a blocked stream's pending frames while the windows admit them."""
        pending = stream.pending
        while pending:
            kind, payload, end_stream = pending.pop(0)
            if kind == HEADERS:
                self._write_headers(stream, payload, end_stream)
            elif not self._write_data(stream, payload, end_stream):
                return False
        self._blocked.pop(stream.id, None)
        return True

    def _flush_blocked(self) -> None:
        for stream in list(self._blocked.values()):
            if self._conn_send <= 0:
                break
            if stream.send_window > 0:
                self._flush(stream)

    def _ended_locally(self, stream: _Stream) -> None:
        """Our END_STREAM went out: the stream closes, with RST_STREAM NO_ERROR if the
        client is still sending (RFC 9113 section 8.1)."""
        if stream.remote_open:
            self._out.append(encode_rst_stream(stream.id, ErrorCode.NO_ERROR))
            self._forget(stream, reset=True)
        else:
            self._forget(stream, reset=False)

    def _forget(self, stream: _Stream, *, reset: bool) -> None:
        del self._streams[stream.id]
        if stream.pending:
            stream.pending.clear()
            self._blocked.pop(stream.id, None)
        if reset:
            self._remember_reset(stream.id)

    def _remember_reset(self, stream_id: int) -> None:
        memory = self._reset_by_us
        memory[stream_id] = None
        if len(memory) > _RESET_MEMORY:
            del memory[next(iter(memory))]

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
                    raise _Failed(ErrorCode.FRAME_SIZE_ERROR, f"frame of {length} bytes")
                start = pos + 9
                if end - start < length:
                    break
                pos = start + length
                kind = length_kind & 0xFF
                sid &= STREAM_ID_MASK
                if not self._peer_settings_seen and kind != SETTINGS:
                    raise _Failed(ErrorCode.PROTOCOL_ERROR, "first frame not SETTINGS")
                if self._cont_id:
                    if kind != CONTINUATION or sid != self._cont_id:
                        raise _Failed(ErrorCode.PROTOCOL_ERROR, "header block interrupted")
                    self._on_continuation(events, flags, data[start:pos])
                elif kind == DATA:
                    self._on_data(events, flags, sid, data, start, length)
                elif kind == HEADERS:
                    self._on_headers(events, flags, sid, data[start:pos])
                else:
                    self._on_other(events, kind, flags, sid, data[start:pos])
                if self._closed:
                    return events
        except _Failed as failure:
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

    def _fail(self, events: list[Event], code: ErrorCode, debug: str) -> None:
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

    def _stream_error(self, events: list[Event], sid: int, code: ErrorCode) -> None:
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
            raise _Failed(ErrorCode.PROTOCOL_ERROR, "DATA on stream 0")
        stop = start + length
        if flags & PADDED:
            if not length:
                raise _Failed(ErrorCode.FRAME_SIZE_ERROR, "padded DATA without pad length")
            pad = data[start]
            if pad >= length:
                raise _Failed(ErrorCode.PROTOCOL_ERROR, "DATA padding too long")
            start += 1
            stop -= pad
        if length > self._conn_recv:
            raise _Failed(ErrorCode.FLOW_CONTROL_ERROR, "connection window exceeded")
        self._conn_recv -= length
        if self._conn_recv <= self._conn_window >> 1:
            self._out.append(encode_window_update(0, self._conn_window - self._conn_recv))
            self._conn_recv = self._conn_window
        stream = self._streams.get(sid)
        if stream is None:
            if self._is_idle(sid):
                raise _Failed(ErrorCode.PROTOCOL_ERROR, f"DATA on idle stream {sid}")
            if sid not in self._reset_by_us:
                self._stream_error(events, sid, ErrorCode.STREAM_CLOSED)
            return
        if not stream.remote_open:
            self._stream_error(events, sid, ErrorCode.STREAM_CLOSED)
            return
        if length > stream.recv_window:
            self._stream_error(events, sid, ErrorCode.FLOW_CONTROL_ERROR)
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
            raise _Failed(ErrorCode.PROTOCOL_ERROR, "HEADERS on stream 0")
        if not sid & 1:
            raise _Failed(ErrorCode.PROTOCOL_ERROR, f"HEADERS on even stream {sid}")
        bad_priority = False
        if flags & (PADDED | PRIORITY_FLAG):
            start = 0
            stop = len(payload)
            if flags & PADDED:
                if not stop:
                    raise _Failed(ErrorCode.FRAME_SIZE_ERROR, "padded HEADERS without pad length")
                stop -= payload[0]
                start = 1
            if flags & PRIORITY_FLAG:
                start += 5
            if stop < start:
                raise _Failed(ErrorCode.PROTOCOL_ERROR, "HEADERS padding too long")
            if flags & PRIORITY_FLAG:
                bad_priority = WORD.unpack_from(payload, start - 5)[0] & STREAM_ID_MASK == sid
            payload = payload[start:stop]
        if flags & END_HEADERS:
            self._on_header_block(events, flags, sid, payload, bad_priority)
            return
        if len(payload) > self._max_header_list * _BLOCK_SLACK:
            raise _Failed(ErrorCode.ENHANCE_YOUR_CALM, "header block too large")
        self._cont_id = sid
        self._cont_flags = flags
        self._cont_parts = [payload]
        self._cont_size = len(payload)
        self._cont_bad_priority = bad_priority

    def _on_continuation(self, events: list[Event], flags: int, payload: bytes) -> None:
        self._cont_size += len(payload)
        if self._cont_size > self._max_header_list * _BLOCK_SLACK:
            raise _Failed(ErrorCode.ENHANCE_YOUR_CALM, "header block too large")
        self._cont_parts.append(payload)
        if flags & END_HEADERS:
            sid = self._cont_id
            block = b"".join(self._cont_parts)
            self._cont_id = 0
            self._cont_parts = []
            self._on_header_block(events, self._cont_flags, sid, block, self._cont_bad_priority)

    def _decode(self, block: bytes) -> tuple[Headers, bool]:
        """The header list of `block` and whether it is malformed as a request."""
        cacheable = not block or min(block) >= 0x80  # one-byte indexed fields only
        if cacheable:
            hit = self._cache.get(block)
            if hit is not None:
                return list(hit[0]), hit[1]
        try:
            headers = cast(Headers, list(self._decoder.decode(block)))
        except OversizedHeaderListError as exc:
            raise _Failed(ErrorCode.ENHANCE_YOUR_CALM, str(exc)) from None
        except HPACKError as exc:
            raise _Failed(ErrorCode.COMPRESSION_ERROR, str(exc)) from None
        malformed = request_is_malformed(headers)
        if cacheable:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[block] = (headers, malformed)
            return list(headers), malformed
        self._cache.clear()
        return headers, malformed

    def _on_header_block(self, events: list[Event], flags: int, sid: int, block: bytes,
                         bad_priority: bool) -> None:
        headers, malformed = self._decode(block)  # always: the decoder's table must follow
        stream = self._streams.get(sid)
        if stream is not None:  # trailers
            if not stream.remote_open:
                self._stream_error(events, sid, ErrorCode.STREAM_CLOSED)
            elif not flags & END_STREAM or bad_priority or trailers_are_malformed(headers):
                self._stream_error(events, sid, ErrorCode.PROTOCOL_ERROR)
            else:
                stream.remote_open = False
                events.append(DataReceived(sid, b"", True))
            return
        if sid <= self._highest:
            if sid in self._reset_by_us:
                return
            # a new stream id must exceed every earlier one (RFC 9113 section 5.1.1)
            raise _Failed(ErrorCode.PROTOCOL_ERROR, f"HEADERS on closed stream {sid}")
        self._highest = sid
        if self._goaway_last is not None or len(self._streams) >= self._max_streams:
            self._stream_error(events, sid, ErrorCode.REFUSED_STREAM)
            return
        if malformed or bad_priority:
            self._stream_error(events, sid, ErrorCode.PROTOCOL_ERROR)
            return
        stream = self._streams[sid] = _Stream(sid, self._peer_initial, self._recv_initial)
        end_stream = bool(flags & END_STREAM)
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
                raise _Failed(ErrorCode.PROTOCOL_ERROR, "PING on a stream")
            if len(payload) != 8:
                raise _Failed(ErrorCode.FRAME_SIZE_ERROR, "PING not 8 bytes")
            if not flags & ACK:
                self._out.append(encode_frame(PING, ACK, 0, payload))
        elif kind == RST_STREAM:
            self._on_rst_stream(events, sid, payload)
        elif kind == PRIORITY:
            if not sid:
                raise _Failed(ErrorCode.PROTOCOL_ERROR, "PRIORITY on stream 0")
            if len(payload) != 5:
                self._stream_error(events, sid, ErrorCode.FRAME_SIZE_ERROR)
            elif WORD.unpack_from(payload)[0] & STREAM_ID_MASK == sid:
                self._stream_error(events, sid, ErrorCode.PROTOCOL_ERROR)
        elif kind == GOAWAY:
            if sid:
                raise _Failed(ErrorCode.PROTOCOL_ERROR, "GOAWAY on a stream")
            if len(payload) < 8:
                raise _Failed(ErrorCode.FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes")
            last, code = GOAWAY_HEAD.unpack_from(payload)
            events.append(ConnectionEnded(code, last & STREAM_ID_MASK, True))
        elif kind == CONTINUATION:
            raise _Failed(ErrorCode.PROTOCOL_ERROR, "CONTINUATION without a header block")
        elif kind == PUSH_PROMISE:
            raise _Failed(ErrorCode.PROTOCOL_ERROR, "PUSH_PROMISE from a client")
        # any other type is an extension we do not know: ignored (RFC 9113 section 5.5)

    def _on_settings(self, flags: int, sid: int, payload: bytes) -> None:
        if sid:
            raise _Failed(ErrorCode.PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & ACK:
            if payload:
                raise _Failed(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload")
            if not self._peer_settings_seen:
                raise _Failed(ErrorCode.PROTOCOL_ERROR, "first frame not SETTINGS")
            if self._settings_unacked:  # our initial window now applies (section 6.9.2)
                self._settings_unacked = False
                delta = self._initial_window - self._recv_initial
                self._recv_initial = self._initial_window
                for stream in self._streams.values():
                    stream.recv_window += delta
            return
        if len(payload) % 6:
            raise _Failed(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS length not a multiple of 6")
        self._peer_settings_seen = True
        grew = False
        for ident, value in SETTING.iter_unpack(payload):
            if ident == Setting.ENABLE_PUSH:
                if value > 1:
                    raise _Failed(ErrorCode.PROTOCOL_ERROR, "ENABLE_PUSH not 0 or 1")
            elif ident == Setting.INITIAL_WINDOW_SIZE:
                if value > MAX_WINDOW:
                    raise _Failed(ErrorCode.FLOW_CONTROL_ERROR, "INITIAL_WINDOW_SIZE too large")
                delta = value - self._peer_initial
                self._peer_initial = value
                grew = grew or delta > 0
                for stream in self._streams.values():
                    stream.send_window += delta
                    if stream.send_window > MAX_WINDOW:
                        raise _Failed(ErrorCode.FLOW_CONTROL_ERROR, "stream window overflow")
            elif ident == Setting.MAX_FRAME_SIZE:
                if not DEFAULT_MAX_FRAME_SIZE <= value <= LARGEST_MAX_FRAME_SIZE:
                    raise _Failed(ErrorCode.PROTOCOL_ERROR, "MAX_FRAME_SIZE out of range")
                self._peer_max_frame = value
            # HEADER_TABLE_SIZE: our blocks never use the dynamic table; the others only
            # advise us, and unknown ids are ignored (section 6.5.2).
        self._out.append(encode_frame(SETTINGS, ACK, 0))
        if grew and self._blocked:
            self._flush_blocked()

    def _on_window_update(self, events: list[Event], sid: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise _Failed(ErrorCode.FRAME_SIZE_ERROR, "WINDOW_UPDATE not 4 bytes")
        increment = WORD.unpack(payload)[0] & STREAM_ID_MASK
        if not sid:
            if not increment:
                raise _Failed(ErrorCode.PROTOCOL_ERROR, "connection WINDOW_UPDATE of 0")
            self._conn_send += increment
            if self._conn_send > MAX_WINDOW:
                raise _Failed(ErrorCode.FLOW_CONTROL_ERROR, "connection window overflow")
            if self._blocked:
                self._flush_blocked()
            return
        stream = self._streams.get(sid)
        if stream is None:
            if self._is_idle(sid):
                raise _Failed(ErrorCode.PROTOCOL_ERROR, f"WINDOW_UPDATE on idle stream {sid}")
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
            raise _Failed(ErrorCode.PROTOCOL_ERROR, "RST_STREAM on stream 0")
        if len(payload) != 4:
            raise _Failed(ErrorCode.FRAME_SIZE_ERROR, "RST_STREAM not 4 bytes")
        stream = self._streams.get(sid)
        if stream is None:
            if self._is_idle(sid):
                raise _Failed(ErrorCode.PROTOCOL_ERROR, f"RST_STREAM on idle stream {sid}")
            return
        self._forget(stream, reset=False)
        events.append(StreamReset(sid, WORD.unpack(payload)[0]))

"""The sending half of an HTTP/2 server connection: streams' state, the peer's settings
and windows, and the frames we queue (flow-controlled DATA waits per stream, in order).

How this works: DATA that the peer's windows do not admit waits on its stream, with
anything queued after it (trailers); `flush_blocked` sends it as windows open (called by the
receiving half on WINDOW_UPDATE and SETTINGS). A stream whose END_STREAM went out while the
client still sends is reset with NO_ERROR (RFC 9113 section 8.1) so it closes. Streams we
reset are remembered (a bounded set) so the receiving half can drop what the peer still
sends on them.
"""

from __future__ import annotations

from typing import Final

from engine.proxy.h2.events import H2Error
from engine.proxy.h2.frames import (
    CONTINUATION,
    DATA,
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_WINDOW,
    END_HEADERS,
    END_STREAM,
    HEADER,
    HEADERS,
    ErrorCode,
    encode_frame,
    encode_integer,
    encode_rst_stream,
)

_pack = HEADER.pack
#: At most this many ids of streams we reset are remembered.
_RESET_MEMORY: Final = 4096


class Stream:
    """One stream's mutable state while it is open or half-closed."""

    __slots__ = ("content_left", "id", "local_open", "pending", "recv_window", "remote_open",
                 "send_window")

    def __init__(self, stream_id: int, send_window: int, recv_window: int) -> None:
        self.id = stream_id
        self.remote_open = True   # the peer may still send (no END_STREAM from it yet)
        self.local_open = True    # the application may still send (no end_stream asked)
        self.send_window = send_window
        self.recv_window = recv_window
        #: Frames waiting for the peer's window: (DATA or HEADERS, payload, end_stream).
        self.pending: list[tuple[int, bytes, bool]] = []
        #: The request's declared content-length less the DATA received (None: none given).
        self.content_left: int | None = None


class StreamSender:
    """Streams and what we send on them; `ServerConnection` adds the receiving half."""

    def __init__(self) -> None:
        self._out: list[bytes] = []
        self._closed = False
        self._streams: dict[int, Stream] = {}
        self._blocked: dict[int, Stream] = {}    # streams with pending frames, in order
        self._reset_by_us: dict[int, None] = {}  # an ordered, bounded set
        self._highest = 0                        # the highest stream id the peer opened
        # The peer's settings and the connection's send window.
        self._peer_initial = DEFAULT_WINDOW
        self._peer_max_frame = DEFAULT_MAX_FRAME_SIZE
        self._conn_send = DEFAULT_WINDOW
        #: A dynamic table size update owed at the start of our next header block (the
        #: peer lowered SETTINGS_HEADER_TABLE_SIZE below what our table may hold).
        self._table_update = b""
        self._table_size = 4096

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

    # -- sending ---------------------------------------------------------------------------

    def _sendable(self, stream_id: int) -> Stream | None:
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
        self._send(HEADERS, stream_id, block, end_stream)

    def send_data(self, stream_id: int, data: bytes, end_stream: bool = False) -> None:
        """Queue DATA: what the peer's windows admit now, in frames of at most its
        SETTINGS_MAX_FRAME_SIZE; the rest waits for WINDOW_UPDATE."""
        self._send(DATA, stream_id, data, end_stream)

    def _send(self, kind: int, stream_id: int, payload: bytes, end_stream: bool) -> None:
        stream = self._sendable(stream_id)
        if stream is None:
            return
        if end_stream:
            stream.local_open = False
        if stream.pending:  # behind what waits for a window, in order
            stream.pending.append((kind, payload, end_stream))
        elif kind == DATA:
            self._write_data(stream, payload, end_stream)
        else:
            self._write_headers(stream, payload, end_stream)

    def send_unary(self, stream_id: int, head: bytes, message: bytes, trailers: bytes) -> None:
        """A whole response: HEADERS `head`, DATA `message`, HEADERS `trailers` with
        END_STREAM; in one piece when the windows admit the message (the usual case)."""
        stream = self._streams.get(stream_id)
        size = len(message)
        limit = self._peer_max_frame
        if (stream is None or not stream.local_open or stream.pending
                or size > stream.send_window or size > self._conn_send or size > limit
                or len(head) > limit or len(trailers) > limit or self._table_update):
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

    def peer_table_size(self, size: int) -> None:
        """The peer's SETTINGS_HEADER_TABLE_SIZE: our blocks never add to the dynamic
        table, but a decoder that lowered its limit below our table's size expects a size
        update first in the next block (RFC 7541 section 4.2)."""
        if size < self._table_size:
            self._table_size = size
            self._table_update = encode_integer(size, 5, 0x20)

    def _write_headers(self, stream: Stream, block: bytes, end_stream: bool) -> None:
        if self._table_update:
            block = self._table_update + block
            self._table_update = b""
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

    def _write_data(self, stream: Stream, data: bytes, end_stream: bool) -> bool:
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

    def _flush(self, stream: Stream) -> bool:
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

    def flush_blocked(self) -> None:
        """Send what waits, stream by stream in the order they blocked, while the
        connection's window lasts (after the peer opened a window)."""
        for stream in list(self._blocked.values()):
            if self._conn_send <= 0:
                break
            if stream.send_window > 0:
                self._flush(stream)

    def _ended_locally(self, stream: Stream) -> None:
        """Our END_STREAM went out: the stream closes, with RST_STREAM NO_ERROR if the
        client is still sending (RFC 9113 section 8.1)."""
        if stream.remote_open:
            self._out.append(encode_rst_stream(stream.id, ErrorCode.NO_ERROR))
            self._forget(stream, reset=True)
        else:
            self._forget(stream, reset=False)

    def _forget(self, stream: Stream, *, reset: bool) -> None:
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

"""Sans-IO frame decoder: feed bytes, get whole `RemotingCommand`s back."""

from __future__ import annotations

from engine.protocol import native
from engine.protocol.command import RemotingCommand, decode_frame
from engine.protocol.errors import FrameError, FrameTooLarge

#: Netty's default `com.rocketmq.remoting.frameMaxLength`.
DEFAULT_MAX_FRAME = 16 * 1024 * 1024
#: Headers longer than this are refused before they are parsed.  RocketMQ has no header
#: limit of its own (only the frame's); real clients' headers stay under ~40 KiB (a send's
#: properties are at most 32 KiB), and parsing 512 KiB of JSON takes a few milliseconds.
DEFAULT_MAX_HEADER = 512 * 1024


class FrameDecoder:
    """Cuts a byte stream into frames, as RocketMQ's `LengthFieldBasedFrameDecoder` does.

    After a `FrameError` the stream is out of step and the decoder refuses further input:
    the owner must close the connection.
    """

    __slots__ = ("_broken", "_buf", "_need", "max_frame", "max_header")

    def __init__(
        self, max_frame: int = DEFAULT_MAX_FRAME, max_header: int = DEFAULT_MAX_HEADER
    ) -> None:
        self._buf = bytearray()
        self._broken = False
        self._need = 0  # bytes the buffered frame needs in all (0: not known yet)
        self.max_frame = max_frame
        self.max_header = max_header

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet make a whole frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[RemotingCommand]:
        """Add received bytes; return every command they complete, in order.

        Raises:
            FrameError: the stream holds a malformed or oversized frame.
        """
        if self._broken:
            raise FrameError("decoder already failed; the connection must be closed")
        if self._buf:
            self._buf += data
            if len(self._buf) < self._need:
                return []  # a large frame still arriving: no copy of what we have
            data = bytes(self._buf)
        out: list[RemotingCommand] = []
        end = len(data)
        max_frame = self.max_frame
        self._need = 0
        # The native splitter decodes the common-case frames; this loop goes on from where
        # it stopped (an incomplete frame, a malformed one, anything less common).
        split = native.split_frames
        pos = 0
        if split is not None and type(data) is bytes:
            pos = split(data, 0, max_frame, self.max_header, out)
        try:
            while end - pos >= 4:
                length = int.from_bytes(data[pos : pos + 4], "big", signed=True)
                if length < 4:
                    raise FrameError(f"frame length {length} is smaller than its header word")
                if length + 4 > max_frame:
                    raise FrameTooLarge(length + 4, max_frame)
                start = pos + 4
                if end - start >= 4:
                    header_len = int.from_bytes(data[start + 1 : start + 4], "big")
                    if header_len > self.max_header:
                        raise FrameError(f"header of {header_len} bytes exceeds the maximum "
                                         f"header size of {self.max_header} bytes")
                if end - start < length:
                    self._need = 4 + length
                    break
                pos = start + length
                out.append(decode_frame(data, start, pos))
        except FrameError:
            self._broken = True
            self._buf = bytearray()
            raise
        self._buf = bytearray(data[pos:]) if pos < end else bytearray()
        return out

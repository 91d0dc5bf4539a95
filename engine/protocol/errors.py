"""Errors of the sans-IO protocol layer.

    ProtocolError
     ├── FrameError          bytes that are not a valid frame; the connection must be closed
     │    └── FrameTooLarge  a frame longer than the configured maximum
     ├── HeaderError         a custom header field missing or not parsable as its type
     ├── BodyError           a body that is not the JSON (or binary) shape expected
     └── AttributeProblem    a topic/group attribute change Apache 5.3 refuses (its words)
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Base of every error raised by `engine.protocol`."""


class FrameError(ProtocolError):
    """The byte stream does not hold a valid frame; the connection cannot be trusted any more."""


class FrameTooLarge(FrameError):
    """A frame announces more bytes than the configured maximum frame size."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"frame of {size} bytes exceeds the maximum frame size of {limit} bytes"
        )
        self.size = size
        self.limit = limit


class HeaderError(ProtocolError):
    """A request or response header lacks a required field or holds an unparsable value."""


class BodyError(ProtocolError):
    """A body is not the JSON document (or binary layout) the command calls for."""


class AttributeProblem(ProtocolError):
    """A topic or group attribute change Apache 5.3 refuses; the text is Apache's message
    (`engine.protocol.attributes`)."""

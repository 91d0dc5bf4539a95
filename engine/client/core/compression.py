"""Body compression: what a producer deflates and what a consumer inflates (message-format §8).

How this works: a single message whose body is at least `compressMsgBodyOverHowmuch` (4096)
bytes is deflated with zlib level 5, the stream Java's `Deflater` writes, and its sysflag gets
COMPRESSED_FLAG | COMPRESSION_ZLIB (0x301).  Batches are never compressed.  On receipt a body
with COMPRESSED_FLAG is inflated when its type bits say zlib (or are 0, as old producers
leave them); LZ4 and ZSTD bodies (5.x producers) are left as stored, with a warning.
"""

from __future__ import annotations

import logging
import zlib

from engine.protocol.message import (
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    COMPRESSION_ZLIB,
)

log = logging.getLogger(__name__)

DEFAULT_COMPRESS_OVER = 4096
DEFAULT_COMPRESS_LEVEL = 5
ZLIB_SYSFLAG = COMPRESSED_FLAG | COMPRESSION_ZLIB


def maybe_compress(body: bytes, over: int = DEFAULT_COMPRESS_OVER,
                   level: int = DEFAULT_COMPRESS_LEVEL) -> tuple[bytes, int]:
    """(body to send, sysflag bits to add): deflated when `len(body) >= over`."""
    if len(body) < over:
        return body, 0
    return zlib.compress(body, level), ZLIB_SYSFLAG


def inflate(body: bytes, sysflag: int) -> bytes:
    """The original body of a received message."""
    if not sysflag & COMPRESSED_FLAG:
        return body
    kind = sysflag & COMPRESSION_TYPE_MASK
    if kind not in (0, COMPRESSION_ZLIB):
        log.warning("body compressed with type 0x%X (not zlib) left as stored", kind)
        return body
    try:
        return zlib.decompress(body)
    except zlib.error as exc:
        log.warning("compressed body does not inflate (%s); left as stored", exc)
        return body

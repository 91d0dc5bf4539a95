"""Decoding of the peer's header blocks (HPACK, RFC 7541) with a cache for blocks that cannot
change the dynamic table.

A block made only of one-byte indexed fields (every byte >= 0x80) adds nothing to the table,
so equal bytes decode to an equal list for as long as the table is unchanged: its decoded list
(and whether it is a well-formed request) is kept by its bytes. Any other block may change the
table and clears the cache once decoded. h2load sends such blocks for every request after
the first; a client whose metadata changes with each request (a RocketMQ 5 client's request
id, date and signature, a gRPC deadline) does not, and goes through the decoder every time
(`hpack_decoder.HpackDecoder`).
"""

from __future__ import annotations

from typing import Final

from engine.proxy.h2.events import ConnectionFailure, Headers
from engine.proxy.h2.fields import request_is_malformed
from engine.proxy.h2.frames import ErrorCode
from engine.proxy.h2.hpack_decoder import HeaderListTooLarge, HpackDecoder, HpackError

#: At most this many decoded all-indexed blocks are kept (a client sends few distinct ones).
_CACHE_LIMIT: Final = 512


class BlockDecoder:
    """The connection's HPACK decoder, bounded by SETTINGS_MAX_HEADER_LIST_SIZE."""

    def __init__(self, max_header_list_size: int) -> None:
        self._decoder = HpackDecoder(max_header_list_size)
        self._cache: dict[bytes, tuple[Headers, bool]] = {}

    def decode(self, block: bytes) -> tuple[Headers, bool]:
        """The header list of a whole block (a fresh list each time) and whether it is
        malformed as a request.

        Raises:
            ConnectionFailure: COMPRESSION_ERROR for a block that does not decode,
                PROTOCOL_ERROR for a list over the size limit (Netty's code, so 5.3.3's;
                the decoder's table is then out of step with the peer's: the connection
                cannot go on).
        """
        cacheable = not block or min(block) >= 0x80
        if cacheable:
            hit = self._cache.get(block)
            if hit is not None:
                return list(hit[0]), hit[1]
        try:
            headers = self._decoder.decode(block)
        except HeaderListTooLarge as exc:
            raise ConnectionFailure(ErrorCode.PROTOCOL_ERROR, str(exc)) from None
        except HpackError as exc:
            raise ConnectionFailure(ErrorCode.COMPRESSION_ERROR, str(exc)) from None
        malformed = request_is_malformed(headers)
        if not cacheable:
            self._cache.clear()
            return headers, malformed
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[block] = (headers, malformed)
        return list(headers), malformed

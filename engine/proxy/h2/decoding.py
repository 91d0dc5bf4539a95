"""Decoding of the peer's header blocks (HPACK, RFC 7541) with a cache for blocks that cannot
change the dynamic table.

A block made only of one-byte indexed fields (every byte >= 0x80) adds nothing to the table,
so equal bytes decode to an equal list for as long as the table is unchanged: its decoded list
(and whether it is a well-formed request) is kept by its bytes. Any other block may change the
table and clears the cache once decoded. Clients send such blocks for every request after the
first (h2load, grpc-java, grpc-go).
"""

from __future__ import annotations

from typing import Final, cast

from hpack import Decoder
from hpack.exceptions import HPACKError, OversizedHeaderListError

from engine.proxy.h2.events import ConnectionFailure, Headers
from engine.proxy.h2.fields import request_is_malformed
from engine.proxy.h2.frames import ErrorCode

#: At most this many decoded all-indexed blocks are kept (a client sends few distinct ones).
_CACHE_LIMIT: Final = 512


class BlockDecoder:
    """The connection's HPACK decoder, bounded by SETTINGS_MAX_HEADER_LIST_SIZE."""

    def __init__(self, max_header_list_size: int) -> None:
        self._decoder = Decoder(max_header_list_size)
        self._cache: dict[bytes, tuple[Headers, bool]] = {}

    def decode(self, block: bytes) -> tuple[Headers, bool]:
        """The header list of a whole block (a fresh list each time) and whether it is
        malformed as a request.

        Raises:
            ConnectionFailure: COMPRESSION_ERROR for a block that does not decode,
                ENHANCE_YOUR_CALM for a list over the size limit (the decoder's table is
                then out of step with the peer's: the connection cannot go on).
        """
        cacheable = not block or min(block) >= 0x80
        if cacheable:
            hit = self._cache.get(block)
            if hit is not None:
                return list(hit[0]), hit[1]
        try:
            raw = cast(list[tuple[bytes, bytes]], self._decoder.decode(block, raw=True))
        except OversizedHeaderListError as exc:
            raise ConnectionFailure(ErrorCode.ENHANCE_YOUR_CALM, str(exc)) from None
        except HPACKError as exc:
            raise ConnectionFailure(ErrorCode.COMPRESSION_ERROR, str(exc)) from None
        # Field values are octets: bytes that are not UTF-8 survive as surrogates
        # (str.encode("utf-8", "surrogateescape") gives them back), never an error.
        headers = [(name.decode("utf-8", "surrogateescape"),
                    value.decode("utf-8", "surrogateescape")) for name, value in raw]
        malformed = request_is_malformed(headers)
        if not cacheable:
            self._cache.clear()
            return headers, malformed
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[block] = (headers, malformed)
        return list(headers), malformed

"""The classic master/slave HA wire format, sans-IO: the two layouts and their decoders.

How this works: the HA port speaks plain TCP, no remoting frames (4.9.7 `HAConnection`/
`HAService.HAClient`, unchanged in 5.x `DefaultHAConnection`/`DefaultHAClient`).  All
integers are big-endian.

Slave -> master, a stream of reports::

    +--------------------------+
    | int64 slave max offset   |   8 bytes (REPORT)
    +--------------------------+

Master -> slave, a stream of transfers::

    +--------------------------+----------------+---------------------------+
    | int64 offset of 1st byte | int32 size n   | n raw commit-log bytes    |
    +--------------------------+----------------+---------------------------+
      TRANSFER_HEADER (12 bytes)                  n = 0: a heartbeat

The master only cares about the most recent complete report; the slave appends the bytes
of each transfer exactly at its own max offset.  Decoders take whatever the socket gave
(`feed(data) -> items`) and keep the incomplete rest for the next call.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from engine.ha.errors import HAProtocolError

REPORT = struct.Struct(
    ">q"  # the slave's commit-log max physical offset (reportSlaveMaxOffset)
)
assert REPORT.size == 8

TRANSFER_HEADER = struct.Struct(
    ">q"  # physical offset of the first data byte (thisOffset)
    "i"  # body size n; 0 for a heartbeat
)
assert TRANSFER_HEADER.size == 12

#: Largest body a slave accepts in one transfer (4.9.7's slave read buffer is 4 MiB).
MAX_TRANSFER_BODY = 4 * 1024 * 1024


def encode_report(offset: int) -> bytes:
    return REPORT.pack(offset)


def encode_transfer_header(offset: int, size: int) -> bytes:
    return TRANSFER_HEADER.pack(offset, size)


@dataclass(frozen=True, slots=True)
class Transfer:
    """One master -> slave frame: `data` belongs at physical offset `offset`."""

    offset: int
    data: bytes

    @property
    def is_heartbeat(self) -> bool:
        return not self.data


class ReportDecoder:
    """Master side: 8-byte reports out of a byte stream."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[int]:
        """Every complete report in `data` plus what was buffered, oldest first."""
        buf = self._buf
        buf += data
        n = len(buf) - len(buf) % REPORT.size
        if not n:
            return []
        out = [v for (v,) in REPORT.iter_unpack(memoryview(buf)[:n])]
        del buf[:n]
        return out


class TransferDecoder:
    """Slave side: transfers out of a byte stream.

    Raises:
        HAProtocolError: from `feed`, on a negative or oversized body length.
    """

    def __init__(self, max_body: int = MAX_TRANSFER_BODY) -> None:
        self._buf = bytearray()
        self.max_body = max_body

    def feed(self, data: bytes) -> list[Transfer]:
        buf = self._buf
        buf += data
        out: list[Transfer] = []
        pos = 0
        end = len(buf)
        hs = TRANSFER_HEADER.size
        while end - pos >= hs:
            offset, size = TRANSFER_HEADER.unpack_from(buf, pos)
            if size < 0 or size > self.max_body:
                raise HAProtocolError(
                    f"transfer body size {size} at offset {offset} is outside 0..{self.max_body}"
                )
            stop = pos + hs + size
            if stop > end:
                break
            out.append(Transfer(offset, bytes(buf[pos + hs : stop])))
            pos = stop
        if pos:
            del buf[:pos]
        return out

    @property
    def buffered(self) -> int:
        return len(self._buf)

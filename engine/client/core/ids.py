"""Client identity: the unique message ids (`UNIQ_KEY`) a producer stamps.

How this works (message-format.md §6.2): a unique id is the upper-case hex of

    bytes  content
    -----  ------------------------------------------------------------------
    4|16   client IP (IPv4, or IPv6 when the host has no IPv4 address)
    2      process id, low 16 bits
    4      a random per-process int (Java: the class loader's hash code)
    4      int32 ms since 00:00:00.000 local time on the 1st of the current month
    2      int16 counter, process-wide, wrapping

The first 10 (or 22) bytes never change in a process, so they are hexed once; each id then
costs one time read and two small formats.
"""

from __future__ import annotations

import datetime
import itertools
import os
import random
import struct
import time

from engine.protocol.message import pack_ip
from engine.remoting.address import local_ip

_PREFIX_TAIL = struct.Struct(">hI")  # pid (int16), class-loader hash (uint32)
assert _PREFIX_TAIL.size == 6


def _month_start_ms(now_ms: int) -> tuple[int, int]:
    """(start of this month, start of next month) in ms, local time."""
    now = datetime.datetime.fromtimestamp(now_ms / 1000).astimezone()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = (start + datetime.timedelta(days=32)).replace(day=1)
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


class UniqIdGenerator:
    """Makes `UNIQ_KEY` values; `next()` is the hot path."""

    def __init__(self, ip: str | None = None, pid: int | None = None,
                 loader_hash: int | None = None) -> None:
        raw_ip = pack_ip(ip or local_ip())
        pid = os.getpid() if pid is None else pid
        loader = random.getrandbits(32) if loader_hash is None else loader_hash & 0xFFFFFFFF
        pid16 = pid & 0xFFFF
        self.prefix = (raw_ip + _PREFIX_TAIL.pack(pid16 - 0x10000 if pid16 >= 0x8000 else pid16,
                                                  loader)).hex().upper()
        self._counter = itertools.count()
        self._start_ms = 0
        self._next_start_ms = 0

    def next(self, now_ms: int | None = None) -> str:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if now >= self._next_start_ms or now < self._start_ms - 1_000_000:
            self._start_ms, self._next_start_ms = _month_start_ms(now)
        diff = now - self._start_ms
        if -1_000_000 < diff < 0:
            diff = 0
        return f"{self.prefix}{diff & 0xFFFFFFFF:08X}{next(self._counter) & 0xFFFF:04X}"


_GENERATOR: UniqIdGenerator | None = None


def uniq_ids() -> UniqIdGenerator:
    """The process-wide generator (the counter is process-wide in Java too)."""
    global _GENERATOR
    if _GENERATOR is None:
        _GENERATOR = UniqIdGenerator()
    return _GENERATOR

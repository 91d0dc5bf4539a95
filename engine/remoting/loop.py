"""Event-loop selection: uvloop when installed (about 2x the loopback throughput), else asyncio.

Servers and long-running tools run on uvloop (`run`).  A one-shot command that prints its
answer afterwards runs on asyncio's loop (`run_once`): after uvloop's loop closes, the
teardown of its io_uring interrupts the process's next blocking write, so a large answer
written to a pipe whose reader is slow came out cut at 64 KiB with exit status 0 (seen with
uvloop 0.23 on Linux 6; `tests/remoting/test_loop.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a new event loop, uvloop's when available."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def run_once(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` on asyncio's own loop: for a command whose output follows (see above)."""
    return asyncio.run(main)

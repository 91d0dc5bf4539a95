"""A one-shot command's large answer reaches a slow pipe whole (engine.remoting.loop)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
SIZE = 2_000_000

CHILD = f"""
import sys
from engine.remoting import loop

async def answer() -> bytes:
    return b"z" * {SIZE}

data = loop.run_once(answer())
print("writing", file=sys.stderr, flush=True)
sys.stdout.buffer.write(data)
sys.stdout.flush()
"""


def test_a_large_answer_written_after_the_loop_reaches_a_slow_reader_whole() -> None:
    """A slow reader (it starts half a second after the child began to write) keeps the child
    blocked on the full pipe: the blocking write uvloop's teardown used to cut short.  The
    half second is the condition under test, a slow consumer, not a wait for an event."""
    with subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as child:
        assert child.stderr is not None and child.stdout is not None
        assert child.stderr.readline() == b"writing\n"
        time.sleep(0.5)
        received = child.stdout.read()
        assert child.wait(timeout=60) == 0
    assert len(received) == SIZE

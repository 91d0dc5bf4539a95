"""The methods `dataclasses` writes for our classes, compiled once per install and kept.

Python 3.11 writes the `__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__` and
`__delattr__` of each dataclass as source text and compiles it when the class is made: for
the 230 frozen wire classes a broker imports, 1,200 compiles and 60 ms of its 170 ms of
imports, and about as much in every proxy worker, name server and mqadmin command.  What a
compile gives depends on the text alone, so after `install()` the code compiled from a text
of our modules (engine.*, mqadmin.*) by an earlier process is used again: it is read from one
file beside the engine package's bytecode (under PYTHONPYCACHEPREFIX where that is set), and
a process that compiled anything new writes the file again when it exits.  Where bytecode
is not written (PYTHONDONTWRITEBYTECODE, `-B`, a read-only install) the file is only read.
The file is bytecode as much as a .pyc is: made for one Python (its magic number is kept
with it), and deleting it costs only the compiles.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any

#: The modules whose dataclasses are kept; other code in the process is left as Python does it.
OURS = ("engine.", "mqadmin.")
#: Past this many kept texts (old ones pile up as classes change), a process writes only the
#: ones it used.
MAX_KEPT = 20_000

_kept: dict[bytes, CodeType] | None = None  # read at the first class of ours
_new: dict[bytes, CodeType] = {}
_used: set[bytes] = set()
_path: Path | None = None


def cache_path() -> Path | None:
    """Where the compiled methods are kept: beside `engine/__init__.py`'s bytecode."""
    try:
        pyc = importlib.util.cache_from_source(str(Path(__file__).parent.parent / "__init__.py"))
    except NotImplementedError:  # no bytecode cache for this Python
        return None
    return Path(pyc).with_name(f"dataclasses.{sys.implementation.cache_tag}.bin")


def install() -> None:
    """Make `dataclasses` use the kept code for our classes from now on (once per process)."""
    global _path
    if _path is not None or (path := cache_path()) is None:
        return
    _path = path
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # shadows the builtin there only
    if not sys.dont_write_bytecode:
        atexit.register(_write)


def _exec(source: str, globals: dict[str, Any] | None = None,
          locals: dict[str, Any] | None = None) -> None:
    name = str((globals or {}).get("__name__", ""))
    if not name.startswith(OURS):
        exec(source, globals, locals)
        return
    global _kept
    if _kept is None:
        _kept = _read(_path) if _path is not None else {}
    key = hashlib.blake2b(source.encode(), digest_size=16).digest()
    code = _kept.get(key)
    if code is None:
        # dont_inherit: compiled as `dataclasses` compiles it, without this module's
        # `from __future__ import annotations` (which would turn __init__'s types into text)
        code = _new[key] = _kept[key] = compile(source, "<string>", "exec", dont_inherit=True)
    _used.add(key)
    exec(code, globals, locals)


def _read(path: Path) -> dict[bytes, CodeType]:
    try:
        magic, kept = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):  # absent, torn or not ours: start anew
        return {}
    if magic != importlib.util.MAGIC_NUMBER or not isinstance(kept, dict):
        return {}
    return kept


def _write() -> None:
    if not _new or _path is None or _kept is None:
        return
    kept = {**_read(_path), **_kept}
    if len(kept) > MAX_KEPT:
        kept = {key: kept[key] for key in _used}
    tmp = _path.with_name(f"{_path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):  # no room or no right to write: the next one compiles
        _path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(marshal.dumps((importlib.util.MAGIC_NUMBER, kept)))
        os.replace(tmp, _path)
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)
    _new.clear()

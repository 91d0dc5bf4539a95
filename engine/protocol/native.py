"""The optional native extension (`_speedups.c`) of the protocol's hot paths.

`pip install` builds it; where it is not built (no compiler) or the environment sets
``MQ_PURE_PYTHON=1``, every caller uses its pure-Python path, which stays the reference:
the tests run both and compare them.  Each native function handles the common case only
and hands everything else (every malformed input included) back to the Python code, so
that errors have one implementation.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import orjson

from engine.protocol.codes import SerializeType
from engine.protocol.command import _LANGUAGE_BY_NAME, RemotingCommand

#: `split_frames(data, pos, max_frame, max_header, out) -> pos`: decodes the frames of
#: `data` from `pos` into `out` while each is a common-case JSON frame; returns the position
#: of the first byte it left (an incomplete frame, or one for the pure-Python decoder).
Splitter = Callable[[bytes, int, int, int, list[RemotingCommand]], int]
#: `send_header_v2(ext) -> SendHeader | None`: None leaves the extFields to Python.
SendHeaderReader = Callable[[Mapping[str, str]], Any]
#: `dispatch_values(props) -> (TAGS, KEYS or "", UNIQ_KEY)`, the last non-empty of each.
DispatchValues = Callable[[str], tuple[str | None, str, str | None]]
#: `strip_wait(props) -> (props without WAIT, wait) | None`: None leaves WAIT to Python.
StripWait = Callable[[str], tuple[str, bool] | None]
#: `string_hash(text) -> int | None`: Java's `String.hashCode()`; None (a lone surrogate)
#: leaves it to Python.
StringHash = Callable[[str], int | None]

#: `write_record(buf, pos, total, magic, crc, queue_id, flag, queue_offset, physical_offset,
#: sysflag, born_ts, born_ip, born_port, store_ts, store_ip, store_port, reconsume_times,
#: prepared_offset, body, topic_part, properties) -> hex offset`: one commit-log record in
#: the layout of engine.protocol.message (`HEADS`, body, topic, properties), written into
#: `buf`; returns the 16 upper-case hex digits of `physical_offset` (the message id's end).
RecordWriter = Callable[..., str]
#: `key_hashes(prefix, keys) -> [key_hash(prefix + k) for k in keys.split(" ") if k] | None`
#: (engine.store.index_file.key_hash): None leaves a lone surrogate to Python.
KeyHashes = Callable[[str, str], list[int] | None]
#: `index_put(buf, entries_at, slot_num, count, begin, entries) -> new slots | None`
#: (engine.store.index_file.put_entries): None, nothing written, leaves it to Python.
IndexPut = Callable[[Any, int, int, int, int, list[tuple[int, int, int]]], int | None]

split_frames: Splitter | None = None
send_header_v2: SendHeaderReader | None = None
dispatch_values: DispatchValues | None = None
strip_wait: StripWait | None = None
string_hash: StringHash | None = None
write_record: RecordWriter | None = None
key_hashes: KeyHashes | None = None
index_put: IndexPut | None = None
_ext: ModuleType | None = None


def _import() -> ModuleType | None:
    try:
        from engine.protocol import _speedups  # type: ignore[attr-defined]
    except ImportError:
        return None
    try:
        _speedups.configure(RemotingCommand, orjson.loads, dict(_LANGUAGE_BY_NAME),
                            SerializeType.JSON, SerializeType.ROCKETMQ)
    except TypeError:  # built from an older _speedups.c: rebuild it (pip install)
        return None
    if not all(hasattr(_speedups, f) for f in ("string_hash", "key_hashes", "index_put")):
        return None  # built from an older _speedups.c: rebuild it (pip install)
    module: ModuleType = _speedups
    return module


def load() -> bool:
    """Use the extension if it is built and not disabled; returns whether it is in use."""
    global _ext, split_frames, send_header_v2, dispatch_values, strip_wait, write_record, \
        key_hashes, index_put, string_hash
    unload()
    if os.environ.get("MQ_PURE_PYTHON", "") not in ("", "0"):
        return False
    _ext = _import()
    if _ext is None:
        return False
    split_frames = _ext.split_frames
    send_header_v2 = _ext.send_header_v2
    dispatch_values = _ext.dispatch_values
    strip_wait = _ext.strip_wait
    string_hash = _ext.string_hash
    write_record = _ext.write_record
    key_hashes = _ext.key_hashes
    index_put = _ext.index_put
    return True


def unload() -> None:
    """Use the pure-Python paths (tests compare the two)."""
    global split_frames, send_header_v2, dispatch_values, strip_wait, write_record, \
        key_hashes, index_put, string_hash
    split_frames = send_header_v2 = dispatch_values = strip_wait = write_record = None
    key_hashes = index_put = string_hash = None


def register_send_header(cls: type) -> None:
    """The class `send_header_v2` builds (engine.protocol.header.broker's SendHeader)."""
    ext = _import()
    if ext is not None:
        ext.configure_send_header(cls)


load()

"""The commit log: appends records (single and batch) into segments and reads them back.

How this works: a put encodes straight into the mmap of the last segment with one
precompiled head `Struct` (`engine.protocol.message.HEADS`) and three slice copies (body,
topic, properties), under a lock, so it is a memory copy; a body of `PWRITE_MIN_BODY` or
more goes to the file with one `pwritev` instead.  A batch body is parsed and checked in
one pass that prepares every record, and written in a second one.  A record that does not
fit (`size + 8 > remaining`) ends the segment with the 8-byte blank record and goes to the
next segment.  Each append returns the `DispatchRequest`s the dispatcher turns into
consume-queue and index entries, so dispatch never decodes what was just encoded.
`topic_queue_table` holds the next logical offset of every (topic, queueId).
"""

from __future__ import annotations

import os
import re
import struct
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from itertools import accumulate
from typing import NamedTuple, overload

from engine.protocol import native
from engine.protocol.message import (
    BATCH_ITEM_HEAD,
    BLANK_MAGIC,
    BLANK_RECORD,
    BORNHOST_V6_FLAG,
    CRC32,
    HEADS,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC,
    NAME_VALUE_SEPARATOR,
    PROPERTIES_LENGTH,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    STOREHOST_V6_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
    Address,
    BatchMessage,
    BrokerMessage,
    RecordError,
    iter_batch_items,
    pack_ip,
    tags_hash_code,
)
from engine.store.errors import MappedFileError
from engine.store.mapped_file import MappedFile
from engine.store.mapped_file_queue import MappedFileQueue, Preallocator
from engine.store.record_scan import SCHEDULE_TOPIC, TIMER_TOPIC, compute_tags_code
from engine.store.results import DispatchRequest, PutMessageStatus

END_FILE_MIN_BLANK_LENGTH = 8
RECORD_HEADROOM = 64 * 1024  # Apache: "Reserve 64kb for encoding buffer outside body"
PUT_OK = PutMessageStatus.PUT_OK
_new = tuple.__new__  # builds the NamedTuples of the hot path without their Python __new__
PWRITE_MIN_BODY = 16 * 1024  # bodies this large go to the file with pwritev, not the mmap
_CRC_MASK = 0x7FFFFFFF
_DISPATCHED_TYPES = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)  # to queues + index


@lru_cache(maxsize=4096)
def _topic_part(topic: str) -> bytes:
    """TOPIC length (int8) and TOPIC, as written after the body (the length byte only
    matters for topics of at most MAX_TOPIC_LENGTH bytes, the only ones written)."""
    t = topic.encode()
    return bytes((min(len(t), 0xFF),)) + t


class _Hosts(NamedTuple):
    """The parts of a record fixed by its born and store hosts."""

    born_ip: bytes
    store_ip: bytes
    sysflag_bits: int  # BORNHOST_V6_FLAG | STOREHOST_V6_FLAG as they apply
    head: struct.Struct  # the record head for these host widths
    id_prefix: str  # offset message id minus the offset: hex of store IP + port


@lru_cache(maxsize=1024)
def _hosts(born_ip: str, store_ip: str, store_port: int) -> _Hosts:
    b, s = pack_ip(born_ip), pack_ip(store_ip)
    bits = (BORNHOST_V6_FLAG if len(b) == 16 else 0) | (STOREHOST_V6_FLAG if len(s) == 16 else 0)
    prefix = (s + store_port.to_bytes(4, "big", signed=True)).hex().upper()
    return _Hosts(b, s, bits, HEADS[bits >> 4], prefix)


@lru_cache(maxsize=64)
def _ids_format(prefix: str, n: int) -> str:
    """A `%` format of `n` comma-separated offset message ids with this IP + port prefix."""
    return ",".join([prefix + "%016X"] * n)


# A dispatch property (`name\x01value`) where a property starts: after a separator, or at the
# start of the string once a separator is put in front of it.
_DISPATCH_PROPERTY = re.compile(
    f"{PROPERTY_SEPARATOR}({PROPERTY_TAGS}|{PROPERTY_KEYS}|{PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX})"
    f"{NAME_VALUE_SEPARATOR}([^{PROPERTY_SEPARATOR}]*)"
)


def _dispatch_values(text: str) -> tuple[str | None, str, str | None]:
    """(TAGS, KEYS or "", UNIQ_KEY) of a properties string: `property_value` of each, in
    one regex pass (the last non-empty value of a name wins)."""
    tags = uniq = None
    keys = ""
    for name, value in _DISPATCH_PROPERTY.findall(PROPERTY_SEPARATOR + text):
        if value:
            if name == PROPERTY_TAGS:
                tags = value
            elif name == PROPERTY_KEYS:
                keys = value
            else:
                uniq = value
    return tags, keys, uniq


class BatchRequests(Sequence[DispatchRequest]):
    """The `DispatchRequest`s of one batch put, kept as columns: they share topic, queue,
    sysflag and store time, and their queue offsets count up from `first_queue_offset` (if
    dispatched to a queue at all).  The dispatcher reads the columns; indexing makes the
    requests."""

    __slots__ = (
        "first_queue_offset",
        "keys",
        "offsets",
        "queue_id",
        "queue_step",
        "sizes",
        "store_timestamp",
        "sysflag",
        "tags_codes",
        "topic",
        "uniq_keys",
    )

    def __init__(
        self,
        topic: str,
        queue_id: int,
        sysflag: int,
        store_timestamp: int,
        first_queue_offset: int,
        queue_step: int,
        offsets: Sequence[int],
        sizes: Sequence[int],
        tags_codes: Sequence[int],
        keys: Sequence[str],
        uniq_keys: Sequence[str | None],
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.sysflag = sysflag
        self.store_timestamp = store_timestamp
        self.first_queue_offset = first_queue_offset
        self.queue_step = queue_step  # 1 if the records take queue offsets, else 0
        self.offsets = offsets  # commit-log offsets
        self.sizes = sizes
        self.tags_codes = tags_codes
        self.keys = keys
        self.uniq_keys = uniq_keys

    def __len__(self) -> int:
        return len(self.offsets)

    @overload
    def __getitem__(self, i: int) -> DispatchRequest: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[DispatchRequest]: ...

    def __getitem__(self, i: int | slice) -> DispatchRequest | Sequence[DispatchRequest]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self.offsets)
        if not -n <= i < n:
            raise IndexError("batch request index out of range")
        i %= n
        return DispatchRequest(
            self.topic, self.queue_id, self.offsets[i], self.sizes[i], self.tags_codes[i],
            self.store_timestamp, self.first_queue_offset + self.queue_step * i, self.keys[i],
            self.uniq_keys[i], self.sysflag, 0,
        )  # fmt: skip


class AppendResult(NamedTuple):
    """Outcome of an in-memory append (before any flush)."""

    status: PutMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    queue_offset: int = 0
    store_timestamp: int = 0
    msg_ids: tuple[str, ...] = ()
    requests: Sequence[DispatchRequest] = ()  # BatchRequests for a batch put
    error_message: str = ""


class CommitLog:
    """Segments under `store_path`; appends are serialised by `_lock`."""

    def __init__(
        self,
        store_path: str,
        file_size: int,
        *,
        store_host: Address,
        max_message_size: int,
        clock: Callable[[], int],
        delay_table: dict[int, int] | None = None,
        preallocator: Preallocator | None = None,
        warm: bool = False,
    ) -> None:
        self.mfq = MappedFileQueue(store_path, file_size, preallocator=preallocator, warm=warm)
        self.store_host = store_host
        #: The largest body (the whole record may be RECORD_HEADROOM more, as Apache's
        #: `MessageExtEncoder`: a body of exactly maxMessageSize is stored), and the largest
        #: batch body.
        self.max_message_size = max_message_size
        self.clock = clock
        self.delay_table = delay_table
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    # ---- offsets
    @property
    def min_offset(self) -> int:
        return self.mfq.min_offset()

    @property
    def max_offset(self) -> int:
        return self.mfq.max_offset()

    @property
    def flushed_offset(self) -> int:
        return self.mfq.flushed_where

    def roll_next_file(self, offset: int) -> int:
        size = self.mfq.file_size
        return offset + size - offset % size

    # ---- reads
    def get_data(self, offset: int, size: int) -> bytes | None:
        """The `size` bytes at global `offset`, or None if that segment is gone."""
        mf = self.mfq.find(offset, return_first_on_miss=offset == 0)
        if mf is None:
            return None
        data = mf.read(offset - mf.file_from_offset, size)
        return data if len(data) == size else None

    def get_store_timestamp(self, offset: int, size: int) -> int:
        """STORETIMESTAMP of the record at `offset` (-1 if unreadable)."""
        mf = self.mfq.find(offset)
        if mf is None:
            return -1
        pos = offset - mf.file_from_offset
        head = mf.read(pos, min(size, HEADS[3].size))
        if len(head) < HEADS[0].size:
            return -1
        sysflag = int.from_bytes(head[36:40], "big", signed=True)
        ts_pos = 56 if not sysflag & BORNHOST_V6_FLAG else 68
        return int.from_bytes(head[ts_pos : ts_pos + 8], "big", signed=True)

    # ---- appends
    def _illegal(self, body: bytes, topic_b: bytes, props_b: bytes) -> AppendResult | None:
        if len(topic_b) > MAX_TOPIC_LENGTH:
            reason = f"topic of {len(topic_b)} bytes is longer than {MAX_TOPIC_LENGTH}"
            return AppendResult(PutMessageStatus.MESSAGE_ILLEGAL, error_message=reason)
        if len(props_b) > MAX_PROPERTIES_LENGTH:
            return AppendResult(
                PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                error_message=f"properties of {len(props_b)} bytes exceed {MAX_PROPERTIES_LENGTH}",
            )
        if len(body) > self.max_message_size:
            reason = f"body of {len(body)} bytes exceeds maxMessageSize {self.max_message_size}"
            return AppendResult(PutMessageStatus.MESSAGE_ILLEGAL, error_message=reason)
        return None

    def _too_large(self, total: int) -> AppendResult:
        return AppendResult(
            PutMessageStatus.MESSAGE_ILLEGAL,
            error_message=(
                f"message of {total} bytes exceeds maxMessageSize {self.max_message_size} "
                f"+ {RECORD_HEADROOM}"
            ),
        )

    def put(self, msg: BrokerMessage) -> AppendResult:
        """Append one message (in memory; flushing is the caller's business)."""
        return self.put_many((msg,))[0]

    def put_many(self, msgs: Sequence[BrokerMessage]) -> list[AppendResult]:
        """Append messages in order under one lock and one store time; one result each (a
        message refused as illegal does not stop the others)."""
        out: list[AppendResult] = []
        add = out.append
        max_size = self.max_message_size
        default_store_host = self.store_host
        table = self.topic_queue_table
        with self._lock:
            now = self.clock()
            for msg in msgs:
                try:
                    add(self._put(msg, now, max_size, default_store_host, table))
                except MappedFileError as e:
                    add(AppendResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED,
                                     error_message=str(e)))
        return out

    def _put(self, msg: BrokerMessage, now: int, max_size: int, default_store_host: Address,
             table: dict[tuple[str, int], int]) -> AppendResult:
        """One message of `put_many`, under its lock."""
        topic, body, queue_id, flag, props, sysflag, born_ts, born_host, store_host, \
            reconsume, prepared = msg
        topic_part = _topic_part(topic)
        props_b = props.encode()
        nb, np_ = len(body), len(props_b)
        if len(topic_part) > MAX_TOPIC_LENGTH + 1 or np_ > MAX_PROPERTIES_LENGTH or nb > max_size:
            illegal = self._illegal(body, topic.encode(), props_b)
            assert illegal is not None
            return illegal
        if store_host is None:
            store_host = default_store_host
        born_ip, store_ip, bits, head, id_prefix = _hosts(
            born_host[0], store_host[0], store_host[1]
        )
        hs = head.size
        nq = len(topic_part)
        total = hs + nb + nq + 2 + np_
        if total > max_size + RECORD_HEADROOM:
            return self._too_large(total)
        if total + END_FILE_MIN_BLANK_LENGTH > self.mfq.file_size:  # Apache: UNKNOWN_ERROR
            return AppendResult(PutMessageStatus.UNKNOWN_ERROR, error_message=(
                f"a record of {total} bytes does not fit in one commit-log segment "
                f"({self.mfq.file_size} bytes)"))
        sysflag = (sysflag & ~0x30) | bits
        dispatched = (sysflag & TRANSACTION_TYPE_MASK) in _DISPATCHED_TYPES
        crc = CRC32(body) & _CRC_MASK
        key = (topic, queue_id)
        files = self.mfq.files
        mf = files[-1] if files else None
        if mf is None or mf.file_size - mf.wrote_position < total + END_FILE_MIN_BLANK_LENGTH:
            mf = self._segment_for(total)
        pos = mf.wrote_position
        phys = mf.file_from_offset + pos
        qo = table.get(key, 0) if dispatched else 0
        write = native.write_record
        hex_offset = None
        if nb < PWRITE_MIN_BODY and write is not None:
            hex_offset = write(
                mf.mm, pos, total, MESSAGE_MAGIC, crc, queue_id, flag, qo, phys, sysflag,
                born_ts, born_ip, born_host[1], now, store_ip, store_host[1], reconsume,
                prepared, body, topic_part, props_b,
            )  # fmt: skip
        elif nb < PWRITE_MIN_BODY:
            # The record layout of `engine.protocol.message.encode_into`, written inline:
            # CRC, hosts and sysflag are already computed here, and this is the hot path.
            mm = mf.mm
            head.pack_into(
                mm, pos, total, MESSAGE_MAGIC, crc, queue_id, flag, qo, phys, sysflag,
                born_ts, born_ip, born_host[1], now, store_ip, store_host[1], reconsume,
                prepared, nb,
            )  # fmt: skip
            q = pos + hs + nb
            mm[pos + hs : q] = body
            mm[q : q + nq] = topic_part
            q += nq
            PROPERTIES_LENGTH.pack_into(mm, q, np_)
            mm[q + 2 : q + 2 + np_] = props_b
        else:
            # Large bodies: one pwritev fills fresh page-cache pages without a page
            # fault per 4 KiB (8x faster than copying into untouched mmap pages); they
            # need no warming (`MappedFile.warm`).
            mf.direct_bytes += total
            head_b = head.pack(
                total, MESSAGE_MAGIC, crc, queue_id, flag, qo, phys, sysflag, born_ts,
                born_ip, born_host[1], now, store_ip, store_host[1], reconsume, prepared, nb,
            )  # fmt: skip
            parts = (head_b, body, topic_part, PROPERTIES_LENGTH.pack(np_), props_b)
            if os.pwritev(mf.fd, parts, pos) != total:
                raise MappedFileError(f"short write to {mf.file_name}")
        mf.wrote_position = pos + total
        mf.store_timestamp = now
        if dispatched:
            table[key] = qo + 1
        if props:
            values = native.dispatch_values or _dispatch_values
            tags, keys, uniq = values(props)
            if topic in (SCHEDULE_TOPIC, TIMER_TOPIC):
                tags_code = compute_tags_code(topic, props, now, self.delay_table)
            else:
                tags_code = tags_hash_code(tags)
        else:
            tags_code, keys, uniq = 0, "", None
        req = _new(DispatchRequest, (
            topic, queue_id, phys, total, tags_code, now, qo, keys, uniq, sysflag, prepared,
        ))  # fmt: skip
        if hex_offset is None:
            hex_offset = phys.to_bytes(8, "big").hex().upper()
        msg_id = id_prefix + hex_offset
        return _new(AppendResult, (PUT_OK, phys, total, qo, now, (msg_id,), (req,), ""))

    def _batch_error(self, body: bytes, error: AppendResult) -> AppendResult:
        """`error`, unless the batch body is malformed: that is reported first."""
        try:
            iter_batch_items(body)
        except RecordError as e:
            return AppendResult(PutMessageStatus.MESSAGE_ILLEGAL, error_message=str(e))
        return error

    def put_batch(self, batch: BatchMessage) -> AppendResult:
        """Append every message of a batch body in one pass, consecutive queue offsets.

        The batch body (`iter_batch_items` layout) is parsed in the loop that prepares the
        records; bodies are copied from it through a memoryview, and so are the properties
        (with their length) when the batch has no properties of its own.  Nothing is
        written before every message is known to be valid.
        """
        data = batch.body
        end = len(data)
        if not end:
            return AppendResult(PutMessageStatus.MESSAGE_ILLEGAL, error_message="empty batch")
        malformed = AppendResult(PutMessageStatus.MESSAGE_ILLEGAL, error_message="bad batch body")
        if end > self.max_message_size:  # Apache limits the whole batch body so
            return self._batch_error(data, AppendResult(
                PutMessageStatus.MESSAGE_ILLEGAL, error_message=(
                    f"batch body of {end} bytes exceeds maxMessageSize {self.max_message_size}")))
        topic = batch.topic
        store_host = batch.store_host or self.store_host
        born_host = batch.born_host
        try:
            topic_part = _topic_part(topic)
            born_ip, store_ip, bits, head, id_prefix = _hosts(
                born_host[0], store_host[0], store_host[1]
            )
        except ValueError:  # not UTF-8 or not an IP address: a malformed body comes first
            error = self._batch_error(data, malformed)
            if error is not malformed:
                return error
            raise
        nq = len(topic_part)
        if nq > MAX_TOPIC_LENGTH + 1:
            illegal = self._illegal(b"", topic.encode(), b"")
            assert illegal is not None
            return self._batch_error(data, illegal)
        sysflag = (batch.sysflag & ~0x30) | bits
        hs = head.size
        fixed = hs + nq  # all but body and PROPERTIES (with its length)
        max_size = self.max_message_size
        schedule = topic == SCHEDULE_TOPIC
        # Dispatch fields: the batch's properties come last, so their values win.
        batch_props = batch.properties
        b_tags, b_keys, b_uniq = _dispatch_values(batch_props) if batch_props else (None, "", None)
        view = memoryview(data)
        unpack_item = BATCH_ITEM_HEAD.unpack_from
        unpack_len = PROPERTIES_LENGTH.unpack_from
        item_head = BATCH_ITEM_HEAD.size
        preps: list[tuple[memoryview, bytes | memoryview, int, int, int, int, str, str | None, str]]
        preps = []
        add_prep = preps.append
        batch_total = 0
        pos = 0
        while pos < end:
            try:
                item_total, _magic, _crc, flag, nb = unpack_item(data, pos)
                p = pos + item_head + nb
                (np_,) = unpack_len(data, p)
            except struct.error:  # the body or the item head overruns the batch
                return self._batch_error(data, malformed)
            q = p + 2 + np_
            if item_total != q - pos or q > end or nb < 0 or np_ < 0:
                return self._batch_error(data, malformed)
            body = view[p - nb : p]
            pos = q
            props_part: bytes | memoryview = view[p:q]  # PROPERTIES length and PROPERTIES
            if np_:
                try:
                    props = data[p + 2 : q].decode()
                except UnicodeDecodeError:
                    return self._batch_error(data, AppendResult(
                        PutMessageStatus.MESSAGE_ILLEGAL,
                        error_message=f"batch message {len(preps)}: properties are not UTF-8",
                    ))  # fmt: skip
                tags, keys, uniq = _dispatch_values(props)
                if batch_props:
                    tags, keys, uniq = b_tags or tags, b_keys or keys, b_uniq or uniq
                    sep = "" if props.endswith(PROPERTY_SEPARATOR) else PROPERTY_SEPARATOR
                    props = props + sep + batch_props
            else:
                props, tags, keys, uniq = batch_props, b_tags, b_keys, b_uniq
            if batch_props:
                props_b = props.encode()
                if len(props_b) > MAX_PROPERTIES_LENGTH:
                    illegal = self._illegal(body.tobytes(), topic.encode(), props_b)
                    assert illegal is not None
                    return self._batch_error(data, illegal)
                props_part = PROPERTIES_LENGTH.pack(len(props_b)) + props_b
            total = fixed + nb + len(props_part)
            if total > max_size + RECORD_HEADROOM:
                illegal = self._illegal(body.tobytes(), topic.encode(), b"") or self._too_large(
                    total
                )
                return self._batch_error(data, illegal)
            add_prep((
                body, props_part, CRC32(body) & _CRC_MASK, flag, total,
                0 if schedule else tags_hash_code(tags), keys, uniq, props,
            ))  # fmt: skip
            batch_total += total
        if batch_total + END_FILE_MIN_BLANK_LENGTH > self.mfq.file_size:
            return AppendResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                error_message=f"{batch_total} bytes do not fit in one commit-log segment",
            )
        dispatched = (sysflag & TRANSACTION_TYPE_MASK) in _DISPATCHED_TYPES
        step = 1 if dispatched else 0
        queue_id = batch.queue_id
        key = (topic, queue_id)
        born_ts, born_port, store_port = batch.born_timestamp, born_host[1], store_host[1]
        reconsume = batch.reconsume_times
        pack = head.pack_into
        delay = self.delay_table
        bodies, props_parts, crcs, flags, totals, tags_codes, all_keys, all_uniq, all_props = zip(
            *preps, strict=True
        )
        with self._lock:
            try:
                mf = self._segment_for(batch_total)
            except MappedFileError as e:
                return AppendResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, error_message=str(e))
            now = self.clock()
            mm = mf.mm
            pos = first_pos = mf.wrote_position
            base = mf.file_from_offset
            qo = first_qo = self.topic_queue_table.get(key, 0) if dispatched else 0
            for body, props_part, crc, flag, total in zip(
                bodies, props_parts, crcs, flags, totals, strict=True
            ):
                nb = len(body)
                pack(
                    mm, pos, total, MESSAGE_MAGIC, crc, queue_id, flag, qo, base + pos, sysflag,
                    born_ts, born_ip, born_port, now, store_ip, store_port, reconsume, 0, nb,
                )  # fmt: skip
                q = pos + hs + nb
                mm[pos + hs : q] = body
                mm[q : q + nq] = topic_part
                pos += total
                mm[q + nq : pos] = props_part
                qo += step
            mf.wrote_position = pos
            mf.store_timestamp = now
            if dispatched:
                self.topic_queue_table[key] = qo
        if schedule:
            tags_codes = tuple(compute_tags_code(topic, p, now, delay) for p in all_props)
        offsets = tuple(accumulate(totals[:-1], initial=base + first_pos))
        reqs = BatchRequests(
            topic, queue_id, sysflag, now, first_qo, step, offsets, totals, tags_codes,
            all_keys, all_uniq,
        )  # fmt: skip
        ids = (_ids_format(id_prefix, len(offsets)) % offsets).split(",")
        return _new(AppendResult, (
            PUT_OK, base + first_pos, pos - first_pos, first_qo, now, tuple(ids), reqs, ""
        ))  # fmt: skip

    def _segment_for(self, size: int) -> MappedFile:
        """The segment to write `size` bytes to; closes the current one with a blank."""
        mf = self.mfq.get_last()
        assert mf is not None
        if size + END_FILE_MIN_BLANK_LENGTH > mf.remaining():
            remaining = mf.remaining()
            if remaining >= 8:
                BLANK_RECORD.pack_into(mf.mm, mf.wrote_position, remaining, BLANK_MAGIC)
            mf.wrote_position = mf.file_size
            mf = self.mfq.get_last()
            assert mf is not None
        return mf

    def append_raw(self, data: bytes, offset: int | None = None) -> bool:
        """Append already-encoded bytes at the end (HA slave); the caller reputs them.

        With `offset`, the bytes must start exactly there: a log without data starts at
        `offset` (its segment is created, the bytes before it stay zero); a full last
        segment rolls to the next one at its boundary.  False if the bytes do not start at
        the end of the log or do not fit in the segment.
        """
        with self._lock:
            mfq = self.mfq
            if offset is not None and offset != mfq.max_offset():
                if mfq.max_offset() != 0:
                    return False
                if mfq.files:  # segments without any data: start over at `offset`
                    mfq.destroy()
                mf = mfq.get_last(offset)
                if mf is None:
                    return False
                mf.wrote_position = mf.flushed_position = offset - mf.file_from_offset
                mfq.flushed_where = offset
            mf = mfq.get_last()
            return mf is not None and mf.append(data)

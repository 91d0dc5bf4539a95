"""One message id wherever an id is asked for: an offset message id or a unique key (UNIQ_KEY),
told apart by where the message is, and the message found by it.

How this works (message-format.md §6): both ids are 32 hex digits (56 with IPv6), so the
digits alone cannot tell them apart.  A 5.x client's message id (34 hex digits: version 01,
MAC, pid, seconds since 2021, sequence) is a unique key only.  Any other id is first read as
an offset message id (the storing broker's ``ip:port`` and a commit-log offset): that holds
when the address is a broker of this cluster and the broker has a message at that offset.  A
unique key's first bytes are the producer's IP, pid and a random number, which read as a port
give pid * 65536 + more: above 65535 unless the pid's low 16 bits are 0, so a unique key is
in practice never taken for an offset id.  Otherwise the id is a unique key, looked up in the
brokers' index (QUERY_MESSAGE): in the topic given, or in every topic of every broker.  When
both fail, the error says what the id was tried as and why each failed (`NotAMessageId`,
exit 3).
"""

from __future__ import annotations

import asyncio
import string
import time
from dataclasses import dataclass

from engine.client.admin import MQAdmin
from engine.client.broker_admin import split_offset_msg_id
from engine.client.errors import ClientError, QueryNotFoundError, UnreachableError
from engine.protocol.message import MessageRecord
from mqadmin.exit_codes import TargetNotFound, UsageProblem
from mqadmin.operations.targets import DLQ_PREFIX, RETRY_PREFIX, masters

#: Id lengths in hex digits: IPv4 and IPv6 hosts.
ID_LENGTHS = (32, 56)
#: A 5.x client's message id: "01" and 16 bytes (rocketmq-clients `MessageIdCodec` V1).
V5_ID_LENGTH = 34
V5_ID_VERSION = "01"
#: 2021-01-01T00:00:00Z, the epoch of a 5.x message id's seconds.
V5_EPOCH_S = 1_609_459_200
#: Index lookups at once when a unique key is searched in every topic.
CONCURRENCY = 16


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as stored, and the broker it was read from."""

    record: MessageRecord
    addr: str
    broker_name: str | None


@dataclass(frozen=True, slots=True)
class UniqueKey:
    """What a unique key (UNIQ_KEY) says about the producer that made it."""

    client_ip: str
    pid: int
    ms_in_month: int  # ms since 00:00 local time on the 1st of the month it was made

    def describe(self) -> str:
        day, ms = divmod(self.ms_in_month, 86_400_000)
        seconds, milli = divmod(ms, 1000)
        clock = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{milli:03d}"
        return f"made by a producer on {self.client_ip} (pid {self.pid}) on day {day + 1} of " \
               f"a month at {clock}"


class NotAMessageId(TargetNotFound):
    """The id is neither an offset message id nor a unique key of a stored message."""


def is_v5_id(msg_id: str) -> bool:
    """A 5.x client's message id (never an offset message id)."""
    return len(msg_id) == V5_ID_LENGTH and msg_id.startswith(V5_ID_VERSION) and all(
        c in string.hexdigits for c in msg_id)


def is_id_text(msg_id: str) -> bool:
    return (len(msg_id) in ID_LENGTHS and all(c in string.hexdigits for c in msg_id)) \
        or is_v5_id(msg_id)


def describe_v5_id(msg_id: str) -> str:
    """What a 5.x message id says of the producer that made it."""
    raw = bytes.fromhex(msg_id[2:])
    mac = ":".join(f"{b:02x}" for b in raw[:6])
    pid = int.from_bytes(raw[6:8], "big")
    made = time.strftime("%Y-%m-%d %H:%M:%S UTC",
                         time.gmtime(V5_EPOCH_S + int.from_bytes(raw[8:12], "big")))
    return f"made by a 5.x client on the host with MAC {mac} (pid {pid}) at {made}"


def decode_unique_key(msg_id: str) -> UniqueKey:
    """The producer's address, pid and the time in the month a unique key carries.

    Raises:
        ValueError: not 32 or 56 hex digits.
    """
    if not is_id_text(msg_id):
        raise ValueError(f"{msg_id!r} is not 32 or 56 hex digits")
    raw = bytes.fromhex(msg_id)
    ip_len = 4 if len(raw) == 16 else 16
    ip = raw[:ip_len]
    host = ".".join(str(b) for b in ip) if ip_len == 4 else ":".join(
        ip[i:i + 2].hex() for i in range(0, 16, 2))
    pid = int.from_bytes(raw[ip_len:ip_len + 2], "big")
    ms = int.from_bytes(raw[ip_len + 6:ip_len + 10], "big")
    return UniqueKey(host, pid, ms)


@dataclass(frozen=True, slots=True)
class _Brokers:
    """The cluster's brokers: name by address (all), and one address per name to read."""

    names: dict[str, str]
    readers: dict[str, str]


async def _brokers(admin: MQAdmin) -> _Brokers:
    info = await admin.namesrv.cluster_info()
    names = {addr: data.broker_name for data in info.broker_addr_table.values()
             for addr in data.broker_addrs.values()}
    return _Brokers(names, await masters(admin, info=info, or_slave=True))


async def _as_offset_id(admin: MQAdmin, msg_id: str, brokers: _Brokers
                        ) -> StoredMessage | str:
    """The message an offset message id names, or why the id is not one."""
    names = brokers.names
    try:
        addr, offset = split_offset_msg_id(msg_id)
    except ValueError as exc:
        return f"it does not decode ({exc})"
    if addr not in names:
        known = ", ".join(sorted(names)) or "none"
        return f"it names {addr}, which is not a broker of this cluster (brokers: {known})"
    try:
        record = await admin.broker.view_message_at(addr, offset)
    except UnreachableError as exc:
        return f"broker {addr} ({names[addr]}) did not answer ({exc})"
    except ClientError as exc:
        return f"broker {addr} ({names[addr]}) has no message at commit-log offset " \
               f"{offset}: {_bounds(await _log_bounds(admin, addr)) or exc}"
    return StoredMessage(record, addr, names[addr])


async def _log_bounds(admin: MQAdmin, addr: str) -> tuple[int, int] | None:
    try:
        table = (await admin.broker.runtime_info(addr)).table
        return int(table["commitLogMinOffset"]), int(table["commitLogMaxOffset"])
    except (ClientError, KeyError, ValueError):
        return None


def _bounds(bounds: tuple[int, int] | None) -> str:
    if bounds is None:
        return ""
    return f"its commit log holds offsets {bounds[0]} to {bounds[1]}"


def _order(found: StoredMessage) -> tuple[bool, int]:
    """Original topics first (a retry or dead-letter copy keeps the unique key), then by
    store time."""
    topic = found.record.topic
    return topic.startswith((RETRY_PREFIX, DLQ_PREFIX)), found.record.store_timestamp


async def _in_topic(admin: MQAdmin, addr: str, name: str, topic: str, msg_id: str
                    ) -> list[StoredMessage]:
    try:
        found = await admin.broker.query_message_by_unique_key(addr, topic, msg_id)
    except QueryNotFoundError:
        return []
    return [StoredMessage(r, addr, name) for r in found]


async def _as_unique_key(admin: MQAdmin, msg_id: str, topic: str | None,
                         cluster: _Brokers) -> list[StoredMessage] | str:
    """The messages with this unique key (in `topic`, else in every topic of every broker),
    or why there are none."""
    brokers = cluster.readers
    if topic is not None:
        try:
            route = await admin.namesrv.topic_route(topic)
        except ClientError as exc:
            return f"topic '{topic}' has no route ({exc})"
        on = {d.broker_name for d in route.broker_datas}
        work = [(a, n, topic) for n, a in brokers.items() if n in on]
        where = f"topic '{topic}'"
    else:
        configs = await asyncio.gather(*(admin.broker.all_topic_config(a)
                                         for a in brokers.values()), return_exceptions=True)
        work = [(a, n, t) for (n, a), c in zip(brokers.items(), configs, strict=True)
                if not isinstance(c, BaseException) for t in sorted(c.topic_config_table)]
        silent = [n for n, c in zip(brokers, configs, strict=True)
                  if isinstance(c, BaseException)]
        where = f"any of the {len({t for _, _, t in work})} topics of " \
                f"{len(brokers) - len(silent)} broker(s)" + (
                    f" ({', '.join(silent)} did not list its topics)" if silent else "")
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(addr: str, name: str, t: str) -> list[StoredMessage] | ClientError:
        async with gate:
            try:
                return await _in_topic(admin, addr, name, t, msg_id)
            except ClientError as exc:
                return exc

    answers = await asyncio.gather(*(one(a, n, t) for a, n, t in work))
    found = sorted((f for a in answers if not isinstance(a, ClientError) for f in a),
                   key=_order)
    if found:
        return found
    failed = [a for a in answers if isinstance(a, ClientError)]
    detail = f" ({len(failed)} lookups failed, e.g. {failed[0]})" if failed else ""
    try:
        made = "; as one it was " + (describe_v5_id(msg_id) if is_v5_id(msg_id)
                                      else decode_unique_key(msg_id).describe())
    except ValueError:
        made = ""
    return f"no broker's index has it in {where}{detail}{made}"


async def find_by_id(admin: MQAdmin, msg_id: str, topic: str | None = None
                     ) -> list[StoredMessage]:
    """The message(s) with this id: an offset message id read from the broker it names,
    else a unique key looked up in `topic` (every topic when None), original topics first.

    Raises:
        UsageProblem: the text cannot be a message id (not 32 or 56 hex digits).
        NotAMessageId: neither kind of id finds a message (the error says why for each).
    """
    msg_id = msg_id.strip()
    if not is_id_text(msg_id):
        raise UsageProblem(
            f"{msg_id!r} is not a message id: a message id (UNIQ_KEY, sendMessage's msgId) "
            "and an offset message id (offsetMsgId) are both 32 hex digits (56 with IPv6), "
            "a 5.x client's message id 34 (starting 01). "
            "Find the message by key with `mqadmin queryMsgByKey -t TOPIC -k KEY`.")
    cluster = await _brokers(admin)
    if is_v5_id(msg_id):
        as_offset: StoredMessage | str = "a 5.x client's message id is not one"
    else:
        as_offset = await _as_offset_id(admin, msg_id, cluster)
    if isinstance(as_offset, StoredMessage):
        return [as_offset]
    as_unique = await _as_unique_key(admin, msg_id, topic, cluster)
    if not isinstance(as_unique, str):
        return as_unique
    hint = "" if topic else "; with -t TOPIC only that topic is searched"
    raise NotAMessageId(
        f"no message with id {msg_id}. Tried as an offset message id: {as_offset}. Tried as "
        f"a message id (UNIQ_KEY): {as_unique}. The message may be older than the brokers "
        f"keep (fileReservedTime), or the id mistyped: look it up by key with `mqadmin "
        f"queryMsgByKey -t TOPIC -k KEY`{hint}.")

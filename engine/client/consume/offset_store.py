"""Consumer offsets kept by the brokers (clustering: Java's `RemoteBrokerOffsetStore`).

How this works (client-behaviour.md §6): the table holds, per queue, the next offset to
consume.  Consumption moves it forward only (`update(..., increase_only=True)`); a reset or
seek may move it anywhere.  `persist_all` sends each held queue's offset to the master of its
broker with a oneway UPDATE_CONSUMER_OFFSET and drops queues no longer held; at shutdown the
same commits are sent answered, so they are stored before the connection closes.  Reading
from the broker maps QUERY_NOT_FOUND to -1 ("no offset") and any other failure to -2.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from engine.client.core.errors import ClientError, QueryNotFoundError
from engine.protocol.body.message_queue import MessageQueue

if TYPE_CHECKING:
    from engine.client.core.instance import ClientInstance

log = logging.getLogger(__name__)

NO_OFFSET = -1
READ_FAILED = -2


class ReadOffsetType(enum.Enum):
    MEMORY = 0
    STORE = 1
    MEMORY_FIRST_THEN_STORE = 2


class OffsetStore(Protocol):
    table: dict[MessageQueue, int]

    async def load(self) -> None: ...

    def update(self, mq: MessageQueue, offset: int, increase_only: bool) -> None: ...

    async def read(self, mq: MessageQueue, kind: ReadOffsetType) -> int: ...

    async def persist_all(self, mqs: Iterable[MessageQueue], *, final: bool = False) -> None: ...

    async def persist(self, mq: MessageQueue) -> None: ...

    def remove(self, mq: MessageQueue) -> None: ...


def update_table(table: dict[MessageQueue, int], mq: MessageQueue, offset: int,
                 increase_only: bool) -> None:
    old = table.get(mq)
    if old is None or not increase_only or offset > old:
        table[mq] = offset


async def read_offset(table: dict[MessageQueue, int], mq: MessageQueue, kind: ReadOffsetType,
                      read_stored: Callable[[MessageQueue], Awaitable[int]]) -> int:
    """`OffsetStore.read` of a store that keeps `table` in memory (both stores' read order).

    MEMORY answers from the table (NO_OFFSET when the queue is not in it);
    MEMORY_FIRST_THEN_STORE does too when the queue is in it, and otherwise reads as STORE
    does: `read_stored` answers the stored offset, NO_OFFSET when none is stored, or
    READ_FAILED; an offset read (>= 0) is remembered in the table.
    """
    if kind is not ReadOffsetType.STORE:
        offset = table.get(mq)
        if offset is not None or kind is ReadOffsetType.MEMORY:
            return NO_OFFSET if offset is None else offset
    offset = await read_stored(mq)
    if offset >= 0:
        table[mq] = offset
    return offset


class RemoteBrokerOffsetStore:
    def __init__(self, instance: ClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        self.table: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        return None

    def update(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        update_table(self.table, mq, offset, increase_only)

    async def read(self, mq: MessageQueue, kind: ReadOffsetType) -> int:
        return await read_offset(self.table, mq, kind, self._read_stored)

    async def _read_stored(self, mq: MessageQueue) -> int:
        """The group's offset of `mq` at its broker (QUERY_CONSUMER_OFFSET)."""
        addr = await self._addr(mq)
        if addr is None:
            return READ_FAILED
        try:
            return await self.instance.api.consumer_offset(addr, self.group, mq.topic,
                                                           mq.queue_id)
        except QueryNotFoundError:
            return NO_OFFSET
        except ClientError as exc:
            log.warning("offset of %s for %s not read: %s", mq, self.group, exc)
            return READ_FAILED

    async def _addr(self, mq: MessageQueue) -> str | None:
        found = await self.instance.subscribe_addr_of(mq)
        return None if found is None else found.addr

    async def _commit(self, mq: MessageQueue, offset: int, answered: bool) -> None:
        addr = await self._addr(mq)
        if addr is None:
            log.warning("no broker for %s: offset %d of %s not committed", mq, offset,
                        self.group)
            return
        try:
            if answered:
                await self.instance.api.update_consumer_offset(addr, self.group, mq.topic,
                                                               mq.queue_id, offset)
            else:
                await self.instance.api.commit_offset_oneway(addr, self.group, mq, offset)
        except ClientError as exc:
            log.warning("offset %d of %s for %s not committed: %s", offset, mq, self.group,
                        exc)

    async def persist_all(self, mqs: Iterable[MessageQueue], *, final: bool = False) -> None:
        held = set(mqs)
        for mq, offset in list(self.table.items()):
            if mq in held:
                await self._commit(mq, offset, final)
        for mq in [mq for mq in self.table if mq not in held]:
            del self.table[mq]

    async def persist(self, mq: MessageQueue) -> None:
        offset = self.table.get(mq)
        if offset is not None:
            await self._commit(mq, offset, False)

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)

"""Store upkeep on brokers: cleanExpiredCQ, deleteExpiredCommitLog, cleanUnusedTopic.

How this works: the three requests only ask the broker to run its own cleanup, so the plan
of cleanExpiredCQ and cleanUnusedTopic is "the broker decides" and their verification is
its answer.  deleteExpiredCommitLog can be planned from outside, from what any RocketMQ
broker reports: its settings give the segment size (``mappedFileSizeCommitLog``) and
``fileReservedTime``; its runtime info the commit log's min and max offset, so the segment
files are known by name (the 20-digit start offset) and range.  A segment is last written
when the next one starts, so the store time of the first message of the next segment
(VIEW_MESSAGE_BY_ID at its start offset) stands in for its modification time, which the
broker compares with fileReservedTime.  The broker deletes the expired segments in its
next cleanup rounds, oldest first, never the segment being written; verification waits for
the commit log's min offset to pass them.  The plan also names, per segment, the consumer
groups that would lose unconsumed messages with it (cleanup_loss), and the run is refused
unless the operator accepts that loss.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import ClientError
from mqadmin.exit_codes import CliError, ExitCode
from mqadmin.operations import cleanup_loss
from mqadmin.operations.cleanup_loss import Loss, SegmentRange
from mqadmin.operations.mutation import Mutation
from mqadmin.operations.targets import brokers_of
from mqadmin.operations.times import format_time

Row = dict[str, Any]

DECIDED = "(decided by the broker)"
FILE_COLUMNS = ("broker", "file", "fromOffset", "toOffset", "bytes", "lastWritten",
                "expired", "unconsumed", "losses")
SEGMENT_KEYS = ("mappedFileSizeCommitLog", "mapedFileSizeCommitLog")
#: Seconds deleteExpiredCommitLog waits, by default, for the broker to delete the files.
DEFAULT_WAIT = 60.0


def _trigger(action: str, admin: MQAdmin, broker_addr: str | None, cluster: str | None,
             call: Callable[[str], Awaitable[None]]) -> Mutation[None]:
    async def read(addr: str) -> None:
        return None

    async def change(addr: str) -> str:
        await call(addr)
        return "OK"

    return Mutation(action, "store", servers=brokers_of(admin, broker_addr, cluster),
                    read=read, show=lambda _: DECIDED, done=lambda _b, _a: True,
                    apply=change, after=DECIDED, role="broker")


def clean_expired_cq(admin: MQAdmin, broker_addr: str | None,
                     cluster: str | None) -> Mutation[None]:
    """Have the broker(s) drop consume queues wholly behind the commit log."""
    return _trigger("cleanExpiredCQ", admin, broker_addr, cluster,
                    admin.broker.clean_expired_consume_queue)


def clean_unused_topic(admin: MQAdmin, broker_addr: str | None,
                       cluster: str | None) -> Mutation[None]:
    """Have the broker(s) drop the queues of topics they no longer have."""
    return _trigger("cleanUnusedTopic", admin, broker_addr, cluster,
                    admin.broker.clean_unused_topic)


@dataclass(frozen=True, slots=True)
class Segment:
    name: str  # 20-digit start offset
    from_offset: int
    to_offset: int  # exclusive: where the next segment starts (or the max offset)
    last_written: int | None  # ms, estimated; None for the segment being written
    expired: bool


@dataclass(frozen=True, slots=True)
class CommitLog:
    """One broker's commit log as seen from outside, and the segments that would go."""

    min_offset: int
    max_offset: int
    segment_size: int
    reserved_hours: int
    segments: list[Segment] = field(default_factory=list)
    losses: tuple[Loss, ...] = ()  # unconsumed messages in the doomed segments, by group

    @property
    def doomed(self) -> list[Segment]:
        """The expired segments the broker deletes: the oldest ones, up to the first that
        has not expired, never the last."""
        out: list[Segment] = []
        for seg in self.segments[:-1]:
            if not seg.expired:
                break
            out.append(seg)
        return out

    @property
    def new_min(self) -> int:
        doomed = self.doomed
        return doomed[-1].to_offset if doomed else self.min_offset

    def show(self) -> str:
        total = self.max_offset - self.min_offset
        return (f"{len(self.segments)} segment(s), offsets {self.min_offset}.."
                f"{self.max_offset} ({human(total)})")

    def promise(self) -> str:
        doomed = self.doomed
        if not doomed:
            return "nothing expired (fileReservedTime " f"{self.reserved_hours} h)"
        size = sum(s.to_offset - s.from_offset for s in doomed)
        text = (f"{len(doomed)} segment(s) go: offsets {doomed[0].from_offset}.."
                f"{doomed[-1].to_offset} ({human(size)})")
        if self.losses:
            text += f"; unconsumed messages lost: {cleanup_loss.summary(self.losses)}"
        return text


def human(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


async def commit_log(admin: MQAdmin, addr: str, now_ms: int | None = None, *,
                     with_losses: bool = False) -> CommitLog:
    """The broker's commit-log segments and which of them have expired (estimated as the
    module docstring says); with `with_losses`, also what each consumer group loses with
    the segments that would go (cleanup_loss)."""
    settings, runtime = await asyncio.gather(admin.broker.broker_config(addr),
                                             admin.broker.runtime_info(addr))
    size = next((int(settings[k]) for k in SEGMENT_KEYS if settings.get(k, "").isdigit()),
                1 << 30)
    reserved = int(settings.get("fileReservedTime", "72") or 72)
    low = int(runtime.table.get("commitLogMinOffset", "0") or 0)
    high = int(runtime.table.get("commitLogMaxOffset", "0") or 0)
    starts = list(range(low - low % size, max(high, low + 1), size))
    now = int(time.time() * 1000) if now_ms is None else now_ms

    async def written(next_start: int) -> int | None:
        if next_start >= high:
            return None
        try:
            return (await admin.broker.view_message_at(addr, next_start)).store_timestamp
        except ClientError:
            return None

    ends = [min(s + size, high) for s in starts]
    times = await asyncio.gather(*(written(s + size) for s in starts))
    segments = [Segment(f"{s:020d}", s, e, t,
                        t is not None and now >= t + reserved * 3_600_000)
                for s, e, t in zip(starts, ends, times, strict=True)]
    state = CommitLog(low, high, size, reserved, segments)
    if with_losses and state.doomed:
        found = await cleanup_loss.losses(admin, addr, [
            SegmentRange(s.name, max(s.from_offset, low), s.to_offset) for s in state.doomed])
        state = CommitLog(low, high, size, reserved, segments, tuple(found))
    return state


class LossRefused(CliError):
    """deleteExpiredCommitLog would delete unconsumed messages and --accept-loss is absent."""

    code = ExitCode.REJECTED


def refuse_losses(states: list[CommitLog]) -> None:
    """`Mutation.validate`: refuse when any group would lose unconsumed messages.

    Raises:
        LossRefused: naming who loses what.
    """
    found = [loss for state in states for loss in state.losses]
    if found:
        total = sum(loss.messages for loss in found)
        raise LossRefused(
            f"deleteExpiredCommitLog would delete {total:,} unconsumed message(s): "
            f"{cleanup_loss.summary(found)}. Nothing was changed. Let the groups catch up "
            "(`mqadmin lag status`), see the segments with --dry-run, or pass --accept-loss "
            "to delete them anyway (the audit log keeps the loss).")


def delete_expired_commit_log(admin: MQAdmin, broker_addr: str | None, cluster: str | None, *,
                              wait: float = DEFAULT_WAIT,
                              refuse_loss: bool = True) -> Mutation[CommitLog]:
    """Have the broker(s) delete expired commit-log segments now, whatever deleteWhen says;
    waits up to `wait` seconds for the min offset to move past them.  The plan names the
    groups losing unconsumed messages with each segment; with `refuse_loss`, such a plan
    is refused (`LossRefused`)."""
    planned: set[str] = set()

    async def read(addr: str) -> CommitLog:
        first = addr not in planned  # the plan's read; later ones only verify
        planned.add(addr)
        return await commit_log(admin, addr, with_losses=first)

    async def change(addr: str) -> str:
        await admin.broker.delete_expired_commit_log(addr)
        return "cleanup started"

    def details(addr: str, state: CommitLog) -> list[Row]:
        rows = []
        for s in state.doomed:
            lost = [loss for loss in state.losses if loss.segment == s.name]
            rows.append({"broker": addr, "file": s.name, "fromOffset": s.from_offset,
                         "toOffset": s.to_offset, "bytes": s.to_offset - s.from_offset,
                         "lastWritten": format_time(s.last_written), "expired": s.expired,
                         "unconsumed": sum(loss.messages for loss in lost),
                         "losses": cleanup_loss.summary(lost) or None})
        return rows

    return Mutation("deleteExpiredCommitLog", "commitlog",
                    servers=brokers_of(admin, broker_addr, cluster),
                    read=read, show=CommitLog.show,
                    done=lambda before, after: after.min_offset >= before.new_min,
                    apply=change, after=CommitLog.promise, role="broker", settle=wait,
                    details=details, detail_columns=FILE_COLUMNS,
                    validate=refuse_losses if refuse_loss else None)

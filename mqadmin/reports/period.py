"""The period a report covers (a UTC day, a week, or from/to), its previous period, its
date partitions."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

UTC = dt.UTC


class PeriodError(ValueError):
    """A period that cannot be built from the options given."""


@dataclass(frozen=True, slots=True)
class Period:
    """``[start, end)`` in UTC; `kind` is daily, weekly or range."""

    kind: str
    start: dt.datetime
    end: dt.datetime

    @property
    def length(self) -> dt.timedelta:
        return self.end - self.start

    @property
    def start_ms(self) -> int:
        return int(self.start.timestamp() * 1000)

    @property
    def end_ms(self) -> int:
        return int(self.end.timestamp() * 1000)

    @property
    def label(self) -> str:
        """``2026-11-23`` for a day, ``2026-11-16..2026-11-22`` for a week, else the ISO
        times."""
        if self.kind in ("daily", "weekly") and _midnight(self.start) and _midnight(self.end):
            last = (self.end - dt.timedelta(days=1)).date()
            first = self.start.date()
            return str(first) if first == last else f"{first}..{last}"
        return f"{iso(self.start)}..{iso(self.end)}"

    def previous(self) -> Period:
        """The period of the same length just before this one (the trend's baseline)."""
        return Period(self.kind, self.start - self.length, self.start)

    def dates(self) -> list[str]:
        """The ``date=`` partition values holding this period's samples."""
        day = self.start.date()
        last = (self.end - dt.timedelta(milliseconds=1)).date()
        out = []
        while day <= last:
            out.append(day.isoformat())
            day += dt.timedelta(days=1)
        return out


def _midnight(moment: dt.datetime) -> bool:
    return moment.time() == dt.time(0)


def iso(moment: dt.datetime) -> str:
    """``2026-11-23T06:00:00Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> dt.datetime:
    """An ISO 8601 date or time; UTC when no zone is given.

    Raises:
        PeriodError: not ISO 8601.
    """
    try:
        moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise PeriodError(f"cannot read the time {text!r}: give ISO 8601, e.g. 2026-11-23 or "
                          "2026-11-23T06:00 (UTC unless a zone is given)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def resolve(kind: str, *, date: str | None = None, start: str | None = None,
            end: str | None = None, now: dt.datetime | None = None) -> Period:
    """The period of a report.

    Args:
        kind: ``daily`` (one UTC day) or ``weekly`` (the 7 days ending with the day);
            ignored when `start` and `end` are given.
        date: the (last) day; default: yesterday, the last complete day.
        start: with `end`, an explicit ``[start, end)`` range.
        end: see `start`.
        now: the current time (tests).

    Raises:
        PeriodError: an unknown kind, a half range, an empty range or an unreadable time.
    """
    if (start is None) != (end is None):
        raise PeriodError("give both --from and --to, or neither")
    if start is not None and end is not None:
        if date is not None:
            raise PeriodError("give either --date or --from/--to, not both")
        first, last = parse_time(start), parse_time(end)
        if last <= first:
            raise PeriodError(f"--to ({iso(last)}) must be after --from ({iso(first)})")
        return Period("range", first, last)
    if kind not in ("daily", "weekly"):
        raise PeriodError(f"unknown period {kind!r}: use daily or weekly, or --from/--to")
    if date is None:
        today = (now or dt.datetime.now(UTC)).astimezone(UTC).date()
        day = today - dt.timedelta(days=1)
    else:
        try:
            day = dt.date.fromisoformat(date.strip())
        except ValueError:
            raise PeriodError(f"cannot read the date {date!r}: give YYYY-MM-DD") from None
    end_at = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(0), UTC)
    days = 1 if kind == "daily" else 7
    return Period(kind, end_at - dt.timedelta(days=days), end_at)

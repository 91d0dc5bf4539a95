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
        """``2026-11-23`` for a day, ``2026-11-16..2026-11-22`` for a week, ``2026-11-24
        until 11:42:30`` for today so far (it ends when the report started), else the ISO
        times."""
        if self.kind in ("daily", "weekly") and _midnight(self.start):
            first = self.start.date()
            if _midnight(self.end):
                last = (self.end - dt.timedelta(days=1)).date()
                return str(first) if first == last else f"{first}..{last}"
            days = f"{first}" if first == self.end.date() else f"{first}..{self.end.date()}"
            return f"{days} until {self.end:%H:%M:%S}"
        return f"{iso(self.start)}..{iso(self.end)}"

    def previous(self) -> Period:
        """The trend's baseline: the day (week) before, same hours; for a range, the range of
        the same length just before."""
        shift = {"daily": dt.timedelta(days=1), "weekly": dt.timedelta(days=7)}.get(
            self.kind, self.length)
        return Period(self.kind, self.start - shift, self.end - shift)

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
        date: the (last) day, YYYY-MM-DD, ``yesterday`` or ``today``; default: today so
            far (until `now`: samples written a moment ago count).
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
    current = (now or dt.datetime.now(UTC)).astimezone(UTC)
    if date is None or date.strip() in ("today", "yesterday"):
        day = current.date() - dt.timedelta(days=1 if date and "y" in date else 0)
    else:
        try:
            day = dt.date.fromisoformat(date.strip())
        except ValueError:
            raise PeriodError(f"cannot read the date {date!r}: give YYYY-MM-DD") from None
        if day > current.date():
            raise PeriodError(f"{day} has not begun yet (today is {current.date()} UTC)")
    end_at = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(0), UTC)
    days = 1 if kind == "daily" else 7
    start_at = end_at - dt.timedelta(days=days)
    if day == current.date():
        if current <= start_at:
            raise PeriodError("today has only just begun: give --date of a past day")
        end_at = current  # today so far
    return Period(kind, start_at, end_at)


def yesterday(now: dt.datetime | None = None) -> str:
    """The last complete UTC day, YYYY-MM-DD (what a scheduled daily report covers)."""
    return ((now or dt.datetime.now(UTC)).astimezone(UTC).date()
            - dt.timedelta(days=1)).isoformat()

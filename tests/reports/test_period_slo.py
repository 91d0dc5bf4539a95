"""Periods and SLO files (plain Python, no Spark)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from mqadmin.reports.period import PeriodError, resolve
from mqadmin.reports.slo import DEFAULT_SLO_MS, SloError, load, parse_duration

NOW = dt.datetime(2026, 11, 24, 6, 0, tzinfo=dt.UTC)


def test_a_past_day_and_its_previous_day() -> None:
    p = resolve("daily", date="2026-11-23", now=NOW)
    assert (p.label, p.dates()) == ("2026-11-23", ["2026-11-23"])
    assert p.previous().label == "2026-11-22"
    assert resolve("daily", date="yesterday", now=NOW).label == "2026-11-23"


def test_daily_defaults_to_today_so_far() -> None:
    p = resolve("daily", now=NOW.replace(hour=11, minute=42, second=30))
    assert p.label == "2026-11-24 until 11:42:30" and p.dates() == ["2026-11-24"]
    assert p.previous().label == "2026-11-23 until 11:42:30"
    week = resolve("weekly", now=NOW)
    assert week.label == "2026-11-18..2026-11-24 until 06:00:00"
    assert week.previous().start == dt.datetime(2026, 11, 11, tzinfo=dt.UTC)


def test_today_so_far_keeps_the_current_minute() -> None:
    # A report at 10:54:45 counts the samples the monitor wrote at 10:54:15-10:54:40.
    now = dt.datetime(2026, 11, 26, 10, 54, 45, 250_000, tzinfo=dt.UTC)
    p = resolve("daily", now=now)
    assert p.end == now and p.label == "2026-11-26 until 10:54:45"
    for second in (15, 40, 45):
        sample = now.replace(second=second, microsecond=0)
        assert p.start <= sample < p.end


def test_weekly_ends_with_the_date() -> None:
    p = resolve("weekly", date="2026-11-22")
    assert p.label == "2026-11-16..2026-11-22"
    assert p.dates()[0] == "2026-11-16" and len(p.dates()) == 7
    assert p.previous().label == "2026-11-09..2026-11-15"


def test_explicit_range_reads_only_its_days() -> None:
    p = resolve("daily", start="2026-11-23T22:00", end="2026-11-24T02:00+00:00")
    assert p.kind == "range" and p.dates() == ["2026-11-23", "2026-11-24"]
    assert p.previous().start == dt.datetime(2026, 11, 23, 18, tzinfo=dt.UTC)
    zoned = resolve("daily", start="2026-11-23T08:00+02:00", end="2026-11-23T09:00+02:00")
    assert zoned.start.hour == 6


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"start": "2026-11-23"}, "--from and --to"),
    ({"start": "2026-11-23", "end": "2026-11-22"}, "must be after"),
    ({"date": "23/11/2026"}, "YYYY-MM-DD"),
    ({"start": "yesterday", "end": "today"}, "ISO 8601"),
    ({"date": "2026-11-23", "start": "2026-11-23", "end": "2026-11-24"}, "not both"),
    ({"date": "2026-11-25"}, "has not begun"),
])
def test_bad_periods(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(PeriodError, match=message):
        resolve("daily", now=NOW, **kwargs)  # type: ignore[arg-type]


def test_slo_file(tmp_path: Path) -> None:
    path = tmp_path / "slo.toml"
    path.write_text('default = "2m"\n[groups]\nfast = "500ms"\n"%RETRY%x" = "1.5h"\nraw = 90\n')
    slo = load(path)
    assert slo.default_ms == 120_000
    assert slo.for_group("fast") == 500 and slo.for_group("%RETRY%x") == 5_400_000
    assert slo.for_group("raw") == 90 and slo.for_group("other") == 120_000
    assert load(None).default_ms == DEFAULT_SLO_MS


@pytest.mark.parametrize(("text", "message"), [
    ('default = "fast"\n', "cannot read the duration"),
    ('default = "0s"\n', "above zero"),
    ("default = [\n", "not valid TOML"),
    ('threshold = "5m"\n', "unknown keys"),
    ('groups = "x"\n', "must be a table"),
])
def test_bad_slo_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "slo.toml"
    path.write_text(text)
    with pytest.raises(SloError, match=message):
        load(path)
    with pytest.raises(SloError, match="no SLO file"):
        load(tmp_path / "missing.toml")


def test_durations() -> None:
    assert [parse_duration(v, "x") for v in ("30s", "5m", "2h", "1d", "250", 7)] == \
        [30_000, 300_000, 7_200_000, 86_400_000, 250, 7]

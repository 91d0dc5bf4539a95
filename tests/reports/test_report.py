"""The whole report on a small generated history: every summary.json figure against the
plain-Python reference, exact SLO minutes on hand-made series, and the output files."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.reports import lagdata, reference

#: Spark is slow to start on a busy machine: the session fixture counts here.
pytestmark = pytest.mark.timeout(900)

START = lagdata.ms(lagdata.DAY)
END = START + 86_400_000
SLO = {"slo-hand": 30_000, "group-1": 1_200_000}
FIGURES = ("samples", "timed_samples", "lag_p50", "lag_p95", "lag_p99", "lag_max",
           "lag_ms_p50", "lag_ms_p95", "lag_ms_p99", "lag_ms_max", "slo_ms", "breach_ms",
           "risk_messages_max")


def _minutes(ms: int) -> float:
    return round(ms / 60_000, 3)


@pytest.fixture(scope="module")
def expected(history: tuple[Path, list[lagdata.Row]]) -> dict[tuple[str, str], Any]:
    return reference.report(history[1], START, END, lambda g: SLO.get(g, 300_000))


def test_every_group_figure_matches_the_reference(report: tuple[Path, dict[str, Any]],
                                                  expected: dict[tuple[str, str], Any]) -> None:
    doc = report[1]
    got = {(g["cluster"], g["group"]): g for g in doc["groups"]}
    assert set(got) == set(expected)
    for key, want in expected.items():
        g = got[key]
        for name in FIGURES:
            assert g[name] == want[name], (key, name)
        assert g["slo_minutes"] == _minutes(want["breach_ms"])
        assert g["risk_minutes"] == _minutes(want["risk_ms"])
        assert (g["gap_cycles"], g["gap_minutes"]) == (want["gap_cycles"],
                                                       _minutes(want["gap_ms"]))
        assert g["coverage"] == want["coverage"]
        assert g["worst_hours"] == want["worst_hours"], key
        for state, ms in want["state_ms"].items():
            assert g[f"{state.lower()}_minutes"] == _minutes(ms), (key, state)
        assert [{k: e[k] for k in want["episodes"][0]} for e in g["episodes"]] \
            == want["episodes"] if want["episodes"] else g["episodes"] == []
        assert [{k: e[k] for k in ("start", "end", "minutes", "cycles", "risk_messages_max")}
                for e in g["risk_episodes"]] == want["risk_episodes"], key
        topics = {t["topic"]: t for t in g["topics"]}
        assert set(topics) == set(want["topics"])
        for topic, tw in want["topics"].items():
            for name in FIGURES:
                assert topics[topic][name] == tw[name], (key, topic, name)
        prev = want["previous"]
        trend = g["trend"]
        if prev is None:
            assert trend["direction"] == "new"
        else:
            assert trend["previous_slo_minutes"] == _minutes(prev["breach_ms"])
            assert trend["previous_lag_ms_p95"] == prev["lag_ms_p95"]


def test_the_generated_history_exercises_every_rule(expected: dict[tuple[str, str], Any]) -> None:
    states = {e["state"] for g in expected.values() for e in g["episodes"]}
    assert {"REWIND", "STOP"} <= states
    assert any(g["state_ms"]["WARNING"] for g in expected.values())
    assert any(g["risk_episodes"] for g in expected.values())
    assert any(g["gap_cycles"] for g in expected.values())


def test_slo_minutes_are_exact_on_hand_made_series(report: tuple[Path, dict[str, Any]]) -> None:
    groups = {g["group"]: g for g in report[1]["groups"]}
    hand = groups["slo-hand"]
    assert (hand["slo_ms"], hand["breach_ms"], hand["slo_minutes"]) == (30_000, 240_000, 4.0)
    assert (hand["samples"], hand["timed_samples"], hand["gap_cycles"]) == (9, 8, 1)
    assert hand["coverage"] == round(9 * 60_000 / 86_400_000, 4)
    assert hand["lag_ms_max"] == 90_000
    assert hand["worst_hours"][0] == {"hour": "2026-11-23T10:00:00Z", "slo_minutes": 4.0,
                                      "lag_ms_max": 90_000, "lag_max": 7}
    default = groups["slo-default"]
    assert (default["slo_ms"], default["breach_ms"]) == (300_000, 120_000)
    fast = groups["slo-fast"]
    assert (fast["breach_ms"], fast["slo_minutes"]) == (70_000, 1.167)


def test_heat_map_and_top_offenders(report: tuple[Path, dict[str, Any]],
                                    expected: dict[tuple[str, str], Any]) -> None:
    doc = report[1]
    heat = {(r["cluster"], r["group"]): r["lag_ms_p95"] for r in doc["heatmap"]["rows"]}
    for key, want in expected.items():
        if want["samples"]:
            assert heat[key] == want["heat"], key
    ranked = sorted((k for k, g in expected.items() if g["breach_ms"] > 0),
                    key=lambda k: (-expected[k]["breach_ms"], -(expected[k]["lag_ms_p95"] or 0),
                                   k[1]))[:10]
    assert [(t["cluster"], t["group"]) for t in doc["top_offenders"]] == ranked
    assert doc["totals"]["groups_in_breach"] == len([g for g in expected.values()
                                                     if g["breach_ms"] > 0])


def test_output_files(report: tuple[Path, dict[str, Any]]) -> None:
    out, doc = report
    names = {p.name for p in out.iterdir()}
    assert names == {"report.html", "summary.json", "summary.parquet", "summary.csv",
                     "lag_over_time.png", "heatmap.png", "slo_minutes.png"}
    table = pq.read_table(out / "summary.parquet")
    assert table.num_rows == len(doc["groups"])
    assert table.column("group").to_pylist() == [g["group"] for g in doc["groups"]]
    with (out / "summary.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [float(r["slo_minutes"]) for r in rows] == [g["slo_minutes"] for g in doc["groups"]]
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 3
    assert not re.search(r"""(src|href)=["']?(https?:|//|file:)""", page)
    assert "slo-hand" in page
    for png in ("lag_over_time.png", "heatmap.png", "slo_minutes.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_today_so_far_counts_the_current_minute(spark: Any, tmp_path: Path) -> None:
    """A report at 10:54:45 reads the samples the monitor wrote at 10:54:15-10:54:40."""
    import datetime as dt

    from mqadmin.reports import job, period

    now = dt.datetime(2026, 11, 26, 10, 54, 45, tzinfo=dt.UTC)
    rows = [lagdata.sample(lagdata.ms(now) - s * 1000, "fresh", "orders", 0, 100, 90, 4_000,
                           interval_ms=5_000) for s in range(5, 35, 5)]
    root = lagdata.write(rows, tmp_path / "lag-history")
    opts = job.Options(str(root), tmp_path / "out", period.resolve("daily", now=now),
                       charts=False)
    doc = job.compute(spark, opts, lambda _m: None)
    assert [(g["group"], g["samples"]) for g in doc["groups"]] == [("fresh", 6)]
    assert doc["period"]["label"] == "2026-11-26 until 10:54:45"

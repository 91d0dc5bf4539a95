"""report.html: one self-contained page (inline CSS, charts as data: URIs) that reads the
same offline, as a mail attachment."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from .charts import duration

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;
margin:24px auto;max-width:1100px;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid
#ddd;padding-bottom:4px}.meta{color:#666;margin-bottom:16px}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{border:1px solid #ddd;border-radius:6px;
padding:8px 14px;min-width:120px}.card b{display:block;font-size:20px}.card span{color:#666;
font-size:12px}table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:4px 8px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th{background:#f6f6f6;position:sticky;top:0;white-space:normal;vertical-align:bottom}td.l,th.l{text-align:left}
tr.bad td{background:#fff1f0}.worse{color:#c0392b}.better{color:#1e8449}
img{max-width:100%;border:1px solid #eee;margin:6px 0}.note{color:#666;font-size:12px}
.state{font-weight:600}.STOP{color:#c0392b}.REWIND{color:#8e44ad}.STALL{color:#d35400}
"""
_ARROW = {"worse": "▲ worse", "better": "▼ better", "same": "= same", "new": "new"}


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{escape(alt)}">'


def _num(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1,
           classes: Sequence[str] = ()) -> str:
    head = "".join(f'<th class="l">{escape(h)}</th>' if i < left else f"<th>{escape(h)}</th>"
                   for i, h in enumerate(headers))
    body = []
    for n, row in enumerate(rows):
        cls = f' class="{classes[n]}"' if n < len(classes) and classes[n] else ""
        cells = "".join(f'<td class="l">{c}</td>' if i < left else f"<td>{c}</td>"
                        for i, c in enumerate(row))
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _name(g: Mapping[str, Any], clusters: int) -> str:
    return escape(f"{g['cluster']}/{g['group']}" if clusters > 1 else str(g["group"]))


def _trend(t: Mapping[str, Any]) -> str:
    d = t["direction"]
    text = _ARROW[d]
    if t.get("slo_minutes_change") not in (None, 0):
        text += f" ({t['slo_minutes_change']:+,.1f} min)"
    return f'<span class="{d}">{escape(text)}</span>'


def render(doc: Mapping[str, Any], charts: Sequence[Path]) -> str:
    """The page for `doc` (summary.json) with `charts` embedded."""
    groups = doc["groups"]
    clusters = len({g["cluster"] for g in groups})
    totals, period = doc["totals"], doc["period"]
    parts = [f"<h1>Consumer lag report — {escape(period['label'])}</h1>",
             f'<div class="meta">{escape(period["start"])} to {escape(period["end"])} (UTC) · '
             f"compared with {escape(doc['previous_period']['label'])} · default SLO "
             f"{escape(duration(doc['slo']['default_ms']))} of time lag · generated "
             f"{escape(doc['generated_at'])} from {escape(doc['input'])}</div>"]
    cards = [(totals["groups"], "consumer groups"), (totals["groups_in_breach"],
             "groups above SLO"), (f"{totals['slo_minutes']:,.0f}", "minutes above SLO"),
             (totals["episodes"], "STOP/REWIND/STALL episodes"),
             (totals["risk_episodes"], "retention-risk episodes"),
             (f"{totals['samples']:,}", "group samples")]
    parts.append('<div class="cards">' + "".join(
        f'<div class="card"><b>{escape(str(v))}</b><span>{escape(t)}</span></div>'
        for v, t in cards) + "</div>")
    parts.append("<h2>Top offenders (minutes above SLO)</h2>")
    if doc["top_offenders"]:
        parts.append(_table(
            ["#", "group", "minutes above SLO", "SLO", "p95 time lag", "max time lag",
             "vs previous"],
            [[str(t["rank"]), _name(t, clusters), _num(t["slo_minutes"]),
              duration(t["slo_ms"]), duration(t["lag_ms_p95"]), duration(t["lag_ms_max"]),
              _ARROW[t["trend"]]] for t in doc["top_offenders"]], left=2))
    else:
        parts.append("<p>No group was above its SLO in this period.</p>")
    parts.append("<h2>Charts</h2>")
    parts += [_img(path, path.stem.replace("_", " ")) for path in charts]
    parts.append("<h2>Episodes (STOP, REWIND, STALL)</h2>")
    parts.append(_episodes(groups, clusters))
    parts.append("<h2>Retention risk (messages the broker may delete unread)</h2>")
    parts.append(_risks(groups, clusters))
    parts.append("<h2>All groups</h2>")
    parts.append(_groups(groups, clusters))
    parts.append('<p class="note">More figures per group and per topic (p99, lag percentiles '
                 "in messages, gaps, verdict minutes) are in summary.csv and summary.json.</p>")
    parts.append(
        '<p class="note">Lag of a group at a sample is the sum over its queues (messages) '
        "and the worst queue (time); in flight, the part of it POP consumers took and had "
        "not acked yet. Percentiles are nearest-rank over the group's samples. "
        "A sample above the group's SLO counts its sampling interval; gaps (brokers not "
        "sampled) and missing samples never count. Coverage is sampled time over the "
        f"period. Verdicts use windows of {doc['verdict_window']} samples, the rules of "
        "<code>mqadmin lag status</code>.</p>")
    body = "\n".join(parts)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Consumer lag '
            f"report {escape(period['label'])}</title><style>{_CSS}</style></head>"
            f"<body>\n{body}\n</body></html>\n")


def _episodes(groups: Sequence[Mapping[str, Any]], clusters: int) -> str:
    rows = sorted(((g, e) for g in groups for e in g["episodes"]),
                  key=lambda ge: (-ge[1]["minutes"], ge[1]["start"]))
    if not rows:
        return "<p>None: every lagging queue kept moving.</p>"
    return _table(["group", "state", "start", "end", "duration", "max lag (msgs)",
                   "max time lag", "topics"],
                  [[_name(g, clusters), f'<span class="state {e["state"]}">{e["state"]}</span>',
                    escape(e["start"]), escape(e["end"]), duration(e["minutes"] * 60_000),
                    _num(e["lag_max"]), duration(e["lag_ms_max"]),
                    escape(", ".join(e["topics"]))] for g, e in rows[:100]], left=2)


def _risks(groups: Sequence[Mapping[str, Any]], clusters: int) -> str:
    rows = sorted(((g, e) for g in groups for e in g["risk_episodes"]),
                  key=lambda ge: (-ge[1]["risk_messages_max"], ge[1]["start"]))
    if not rows:
        return "<p>None: no group was at risk of losing messages to cleanup.</p>"
    return _table(["group", "start", "end", "duration", "messages at risk (max)",
                   "max lag (msgs)"],
                  [[_name(g, clusters), escape(e["start"]), escape(e["end"]),
                    duration(e["minutes"] * 60_000), _num(e["risk_messages_max"]),
                    _num(e["lag_max"])] for g, e in rows[:100]])


def _groups(groups: Sequence[Mapping[str, Any]], clusters: int) -> str:
    ranked = sorted(groups, key=lambda g: (-g["breach_ms"], -(g["lag_ms_p95"] or 0),
                                           g["group"]))
    rows, classes = [], []
    for g in ranked:
        worst = g["worst_hours"][0]["hour"][11:16] + " UTC" if g["worst_hours"] else "–"
        cover = g["coverage"] * 100
        rows.append([_name(g, clusters), _num(g["samples"]),
                     f"{cover:.0f}%" if cover >= 10 or cover == 0 else f"{cover:.2g}%",
                     _num(g["lag_max"]), _num(g.get("in_flight_max")),
                     duration(g["lag_ms_p50"]),
                     duration(g["lag_ms_p95"]), duration(g["lag_ms_max"]),
                     duration(g["slo_ms"]),
                     _num(g["slo_minutes"]), str(len(g["episodes"])),
                     str(len(g["risk_episodes"])), worst, _trend(g["trend"])])
        classes.append("bad" if g["breach_ms"] > 0 else "")
    return _table(["group", "samples", "coverage", "max lag (msgs)", "max in flight",
                   "p50 time lag", "p95 time lag", "max time lag", "SLO", "min above SLO",
                   "episodes", "risk", "worst hour", "vs previous"],
                  rows, classes=classes)


def write(doc: Mapping[str, Any], charts: Sequence[Path], out: Path) -> Path:
    path = out / "report.html"
    path.write_text(render(doc, charts), encoding="utf-8")
    return path

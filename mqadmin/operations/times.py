"""Points in time as operators write them and as mqadmin prints them."""

from __future__ import annotations

import datetime as dt
import time

from mqadmin.exit_codes import UsageProblem

APACHE_TIME_FORMAT = "%Y-%m-%d#%H:%M:%S:%f"


def parse_timestamp(value: str) -> int:
    """A point in time as epoch milliseconds: ``now``, milliseconds, Apache's
    ``yyyy-MM-dd#HH:mm:ss:SSS``, or ISO 8601 (``2024-05-01T12:00``; local time when no
    zone is given).

    Raises:
        UsageProblem: none of these forms.
    """
    text = value.strip()
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    for parse in (lambda t: dt.datetime.strptime(t, APACHE_TIME_FORMAT),
                  dt.datetime.fromisoformat):
        try:
            moment = parse(text)
        except ValueError:
            continue
        return int(moment.timestamp() * 1000)  # naive: local time, as Apache parses it
    raise UsageProblem(f"cannot read the time {value!r}: give milliseconds since the epoch, "
                       "'now', yyyy-MM-dd#HH:mm:ss:SSS or ISO 8601 (2024-05-01T12:00:00).")


def format_time(ms: int | None) -> str | None:
    """Epoch milliseconds as local ``yyyy-MM-dd HH:mm:ss.SSS`` (None for 0 or less)."""
    if ms is None or ms <= 0:
        return None
    moment = dt.datetime.fromtimestamp(ms / 1000)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}"

"""`dlq show`: a group's dead letters one by one, or summarised by a pattern.

How this works: the dead letters come from `read.scan` with the filters given; each
becomes a row with its ids, original topic and id, keys, tags, times, time spent in the DLQ,
triage state from the ledger, and a body preview (`model.body_preview`).  A summary
groups them by one or more of: original topic, tag, key prefix (the key up to its last
``-``, ``_``, ``:``, ``.`` or ``/``), store hour, or a top-level field of a JSON body
(``field:NAME``), with counts and the first and last store time of each group.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Callable, Sequence

from engine.client.admin import MQAdmin
from mqadmin.exit_codes import UsageProblem
from mqadmin.operations.dlq.ledger import TRIAGE, Ledger
from mqadmin.operations.dlq.model import DeadLetter, Filters, Row, age_text, body_preview
from mqadmin.operations.dlq.read import read_all
from mqadmin.operations.mutation import Progress
from mqadmin.operations.times import format_time

SHOW_COLUMNS = ("msgId", "originTopic", "originMsgId", "keys", "tags", "reconsumeTimes",
                "bornTime", "storeTime", "inDlq", "triage", "body")
SUMMARY_COLUMNS = ("by", "value", "count", "first", "last")
SUMMARY_KEYS = ("topic", "tag", "key-prefix", "hour", "field:NAME")
_PREFIX = re.compile(r"^(.*[-_:./])")


def triage_of(d: DeadLetter, states: dict[str, str]) -> str:
    state = states.get(d.key)
    return TRIAGE.get(state, "unhandled") if state else "unhandled"


def letter_row(d: DeadLetter, states: dict[str, str], *, full_body: bool = False,
               now_ms: int | None = None) -> Row:
    """Every field of one dead letter, as `dlq show` prints it."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return {"msgId": d.msg_id, "offsetMsgId": d.offset_msg_id, "brokerName": d.broker_name,
            "queueId": d.queue_id, "queueOffset": d.queue_offset,
            "originTopic": d.origin_topic, "originMsgId": d.origin_msg_id,
            "keys": " ".join(d.keys) or None, "tags": d.tags,
            "reconsumeTimes": d.reconsume_times, "bornTime": format_time(d.born_timestamp),
            "storeTime": format_time(d.store_timestamp),
            "inDlq": age_text(now - d.store_timestamp), "triage": triage_of(d, states),
            "properties": d.properties, "bodySize": len(d.body),
            "body": body_preview(d.body, None if full_body else 80)}


async def show(admin: MQAdmin, group: str, filters: Filters | None = None, *,
               ledger: Ledger | None = None, full_body: bool = False,
               on_progress: Progress | None = None) -> list[Row]:
    """The dead letters of `group` matching `filters`, oldest first per queue.

    Raises:
        TargetNotFound: the group has no dead-letter topic.
    """
    letters = await read_all(admin, group, filters, on_progress=on_progress)
    states = ledger.triage(group) if ledger is not None else {}
    now = int(time.time() * 1000)
    return [letter_row(d, states, full_body=full_body, now_ms=now) for d in letters]


def _key_prefix(d: DeadLetter) -> str:
    if not d.keys:
        return "(no key)"
    found = _PREFIX.match(d.keys[0])
    return found.group(1) if found else d.keys[0]


def _hour(d: DeadLetter) -> str:
    moment = dt.datetime.fromtimestamp(d.store_timestamp / 1000)
    return moment.strftime("%Y-%m-%d %H:00")


def _field(name: str) -> Callable[[DeadLetter], str]:
    def value(d: DeadLetter) -> str:
        try:
            doc = json.loads(d.body)
        except ValueError:
            return "(not JSON)"
        if not isinstance(doc, dict) or name not in doc:
            return "(absent)"
        v = doc[name]
        return v if isinstance(v, str) else json.dumps(v)
    return value


def summary_keys(by: str) -> list[tuple[str, Callable[[DeadLetter], str]]]:
    """The grouping functions of a ``--summary`` value (comma-separated).

    Raises:
        UsageProblem: an unknown grouping.
    """
    out: list[tuple[str, Callable[[DeadLetter], str]]] = []
    for part in (p.strip() for p in by.split(",") if p.strip()):
        if part == "topic":
            out.append((part, lambda d: d.origin_topic))
        elif part == "tag":
            out.append((part, lambda d: d.tags or "(no tag)"))
        elif part in ("key-prefix", "key"):
            out.append(("key-prefix", _key_prefix))
        elif part == "hour":
            out.append((part, _hour))
        elif part.startswith("field:") and part[6:]:
            out.append((part, _field(part[6:])))
        else:
            raise UsageProblem(f"--summary {part!r} is not a grouping: use "
                               f"{', '.join(SUMMARY_KEYS)} (several comma-separated).")
    if not out:
        raise UsageProblem(f"--summary needs a grouping: {', '.join(SUMMARY_KEYS)}.")
    return out


def summarise(letters: Sequence[DeadLetter], by: str) -> list[Row]:
    """Counts and store-time ranges of the dead letters grouped by `by`, most first."""
    keys = summary_keys(by)
    groups: dict[tuple[str, ...], list[int]] = {}
    for d in letters:
        value = tuple(f(d) for _, f in keys)
        span = groups.setdefault(value, [0, d.store_timestamp, d.store_timestamp])
        span[0] += 1
        span[1] = min(span[1], d.store_timestamp)
        span[2] = max(span[2], d.store_timestamp)
    label = ",".join(name for name, _ in keys)
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1][0], kv[0]))
    return [{"by": label, "value": " / ".join(v), "count": n, "first": format_time(lo),
             "last": format_time(hi)} for v, (n, lo, hi) in ranked]


async def summary(admin: MQAdmin, group: str, by: str, filters: Filters | None = None, *,
                  on_progress: Progress | None = None) -> list[Row]:
    """`summarise` over the group's dead letters matching `filters`."""
    summary_keys(by)  # refuse a bad grouping before reading anything
    return summarise(await read_all(admin, group, filters, on_progress=on_progress), by)

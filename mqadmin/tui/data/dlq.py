"""The Dead letters screens' data, all through the dead-letter operations and their ledger
(dlq list / show / status / export, as the CLI runs them; resend and discard are the
operations' own changes, see changes.py).

How this works: the ledger (SQLite) is opened for each call on the backend thread and
closed after it, so no connection crosses threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.client.admin import MQAdmin
from mqadmin.config import Endpoint
from mqadmin.exit_codes import CliError
from mqadmin.operations.dlq import list as dlq_list
from mqadmin.operations.dlq import show as dlq_show
from mqadmin.operations.dlq import status as dlq_status
from mqadmin.operations.dlq import transfer as dlq_transfer
from mqadmin.operations.dlq.ledger import ledger_of
from mqadmin.operations.dlq.model import Filters

Row = dict[str, Any]
#: Dead letters read for the group screen (the newest are at the end of each queue).
LETTERS_LIMIT = 2000


@dataclass(frozen=True, slots=True)
class DlqView:
    groups: list[Row]
    batches: list[Row] = field(default_factory=list)


async def read_dlq(admin: MQAdmin, endpoint: Endpoint) -> DlqView:
    """Every group with dead letters (dlq list) and the newest batches (dlq status)."""
    with ledger_of(endpoint) as ledger:
        groups = await dlq_list.list_groups(admin, ledger)
        batches = await dlq_status.status(admin, ledger, limit=20)
    return DlqView(groups, batches)


async def read_letters(admin: MQAdmin, endpoint: Endpoint, group: str) -> list[Row]:
    """The group's dead letters (dlq show with whole bodies), each with a one-line preview."""
    with ledger_of(endpoint) as ledger:
        rows = await dlq_show.show(admin, group, Filters(limit=LETTERS_LIMIT), ledger=ledger,
                                   full_body=True)
    for row in rows:
        flat = " ".join(str(row["body"]).split())
        row["preview"] = flat if len(flat) <= 60 else flat[:59] + "…"
    return rows


async def export_letters(admin: MQAdmin, group: str, ids: frozenset[str] | None,
                         path: Path) -> int:
    """dlq export of the chosen dead letters (all when `ids` is None) to `path`."""
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as out:
            count = await dlq_transfer.export(admin, group, out, Filters(ids=ids))
        partial.replace(path)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}.") from None
    finally:
        partial.unlink(missing_ok=True)
    return count

"""Options and helpers the dead-letter commands share (filters)."""

from __future__ import annotations

from typing import Annotated

import typer

from mqadmin.operations.dlq.model import Filters
from mqadmin.options import parse_timestamp

GroupOpt = Annotated[str, typer.Option("-g", "--group", help="Consumer group.")]
TopicFilter = Annotated[str | None, typer.Option(
    "--topic", help="Only dead letters from this original topic.")]
KeyFilter = Annotated[str | None, typer.Option("--key", help="Only dead letters with this key.")]
TagFilter = Annotated[str | None, typer.Option("--tag", help="Only dead letters with this tag.")]
SinceFilter = Annotated[str | None, typer.Option(
    "--since", help="Stored in the DLQ at or after (ms, yyyy-MM-dd#HH:mm:ss:SSS, ISO).")]
UntilFilter = Annotated[str | None, typer.Option("--until", help="Stored before this time.")]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1,
                                              help="At most this many dead letters.")]


def filters(topic: str | None, key: str | None, tag: str | None, since: str | None,
            until: str | None, limit: int | None = None,
            ids: frozenset[str] | None = None) -> Filters:
    return Filters(topic=topic.strip() if topic else None, key=key.strip() if key else None,
                   tag=tag.strip() if tag else None,
                   since=parse_timestamp(since) if since else None,
                   until=parse_timestamp(until) if until else None, ids=ids, limit=limit)

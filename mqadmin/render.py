"""The one renderer: rows (dicts with stable keys) as a table, JSON or CSV; notes to stderr.

How this works: every command turns its result into ``list[dict]`` whose keys are the
column names, so ``-o json`` carries exactly what the table shows.  A table is drawn with
rich when stdout is a terminal and as plain space-aligned columns when it is piped (easy to
`cut`/`awk`, no escape codes).  stdout carries data only; plans, warnings and errors go to
stderr.
"""

from __future__ import annotations

import contextlib
import csv
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from enum import StrEnum
from typing import Any, TextIO

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

Row = Mapping[str, Any]


class OutputFormat(StrEnum):
    """Values of ``-o``."""

    TABLE = "table"
    JSON = "json"
    CSV = "csv"


def _cell(value: Any) -> str:
    """A value as table/CSV text (JSON keeps the native value)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def columns_of(rows: Sequence[Row], columns: Sequence[str] | None) -> list[str]:
    """The given columns, else the keys of the rows in first-seen order."""
    if columns is not None:
        return list(columns)
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def render(rows: Sequence[Row], fmt: OutputFormat = OutputFormat.TABLE, *,
           columns: Sequence[str] | None = None, stream: TextIO | None = None,
           vertical: bool = False) -> None:
    """Write `rows` to `stream` (stdout by default) in `fmt`.

    Args:
        rows: one dict per row; keys outside `columns` are not written.
        fmt: table, json or csv.
        columns: column order (needed to print a header for zero rows).
        stream: where to write; stdout unless told.
        vertical: draw a table as one ``field  value`` block per row (for a few wide rows,
            such as one message); JSON and CSV are unchanged.
    """
    out = sys.stdout if stream is None else stream
    cols = columns_of(rows, columns)
    if fmt is OutputFormat.JSON:
        doc = [{c: row.get(c) for c in cols} for row in rows]
        out.write(json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")
    elif fmt is OutputFormat.CSV:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(cols)
        writer.writerows([_cell(row.get(c)) for c in cols] for row in rows)
    elif vertical:
        _vertical(out, rows, cols)
    else:
        console = Console(file=out, highlight=False, soft_wrap=False)
        if console.is_terminal:
            _rich_table(console, rows, cols)
        else:
            out.write(plain_table(rows, cols))
    out.flush()


def _vertical(out: TextIO, rows: Sequence[Row], columns: Sequence[str]) -> None:
    """``field  value`` lines per row, rows apart by a blank line (values may span lines)."""
    width = max((len(c) for c in columns), default=0)
    blocks = []
    for row in rows:
        lines = []
        for c in columns:
            text = _cell(row.get(c)).replace("\n", "\n" + " " * (width + 2))
            lines.append(f"{c.ljust(width)}  {text}".rstrip())
        blocks.append("\n".join(lines) + "\n")
    out.write("\n".join(blocks))


def plain_table(rows: Sequence[Row], columns: Sequence[str]) -> str:
    """Space-aligned columns under a header line, two spaces apart, no trailing blanks; a
    line break inside a value is written as ``\\n`` so every row stays one line."""
    cells = [list(columns)] + [[_cell(row.get(c)).replace("\n", "\\n") for c in columns]
                               for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        + "\n"
        for line in cells
    )


def _rich_table(console: Console, rows: Sequence[Row], columns: Sequence[str]) -> None:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(Text(_cell(row.get(c))) for c in columns))
    console.print(table)


def _stderr_console() -> Console:
    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


def note(message: str) -> None:
    """Progress or context for the operator, on stderr."""
    _stderr_console().print(Text(message))


def warn(message: str) -> None:
    _stderr_console().print(Text(f"mqadmin: warning: {message}", style="yellow"))


def error(message: str) -> None:
    _stderr_console().print(Text(f"mqadmin: error: {message}", style="bold red"))


def plan(title: str, rows: Sequence[Row], columns: Sequence[str]) -> None:
    """What a mutation is about to change, as a table on stderr."""
    note(title)
    render(rows, OutputFormat.TABLE, columns=columns, stream=sys.stderr)


@contextlib.contextmanager
def progress(description: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr for a long operation, drawn only when stderr is a terminal;
    yields ``update(done, total)``."""
    if not sys.stderr.isatty():
        yield lambda done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    console = Console(file=sys.stderr)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update

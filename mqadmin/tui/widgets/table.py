"""`RowTable`: a DataTable of row dicts, sortable by any column, filterable, that keeps the
cursor on the same row (by key) across refreshes.

How this works: screens hand it every row they have (`show`); it filters them with the
current filter text (any cell containing it, case-insensitively), sorts them by the sort
column, and formats their cells as `Text` (never markup: a topic may be called "[x]"); an
unstyled cell stays a `PlainCell`, its string, until DataTable draws it (it draws only the
rows on screen): making a `Text` of each of 13,000 topics x 12 columns on every refresh
took most of a big cluster's first paint; and a row equal to the one drawn last time keeps
its cells (but those drawn from more than the row), so a refresh of 13,000 unchanged topics
makes no cell at all.
When the keys come out in the same order as last time only the cells that changed are
updated, so a refresh neither flickers nor moves the cursor; otherwise the rows are rebuilt
and the cursor put back on the row it was on: the first `FIRST_ROWS` (from the cursor's
row) at once, the rest a chunk at a time after each paint, so 13,000 topics show their
first screenful without waiting for the cells of the other 12,800, and a key pressed
meanwhile waits for one chunk at most; a refresh during the fill updates the rows added
and the fill goes on with the refreshed rows.  Column widths come from the cells' plain
text, measured once when the cell is made, instead of DataTable's measuring of every
rendered cell (most of the cost of showing a thousand rows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import CellKey, ColumnKey, DuplicateKey, RowKey
from textual.widgets.data_table import Row as TableRow

Row = dict[str, Any]
Cell = str | Text
#: Rows added at once when the table is rebuilt (a screenful and more, around the cursor's
#: row); the rest follow `FILL_ROWS` at a time, each after the screen was painted.
FIRST_ROWS = 200
FILL_ROWS = 500


def width(text: str) -> int:
    """Terminal cells `text` takes (its length when it is ASCII)."""
    return len(text) if text.isascii() else cell_len(text)


def plain(value: Any) -> Cell:
    """The default cell: empty for None, the value as text otherwise."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return value if isinstance(value, Text) else str(value)


@dataclass(frozen=True, slots=True)
class Col:
    """A column: the row key it shows, its heading, how a value is drawn."""

    key: str
    label: str
    fmt: Callable[[Any], Cell] = plain
    #: Draws the cell from the whole row instead of the value (e.g. a sparkline).
    of_row: Callable[[Row], Cell] | None = None
    #: The row key to sort on instead of `key` (e.g. a verdict's severity).
    sort_on: str | None = None

    def cell(self, row: Row) -> Drawn:
        value = self.of_row(row) if self.of_row is not None else self.fmt(row.get(self.key))
        return value if isinstance(value, Text) else PlainCell(value)


class PlainCell:
    """An unstyled cell: its text, made a rich `Text` only when it is drawn."""

    __slots__ = ("plain",)

    def __init__(self, plain: str) -> None:
        self.plain = plain

    def __rich__(self) -> Text:
        return Text(self.plain, no_wrap=True)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlainCell) and other.plain == self.plain

    def __hash__(self) -> int:
        return hash(self.plain)


#: A cell as the table holds it.
Drawn = Text | PlainCell


def sort_key(value: Any) -> tuple[int, Any]:
    """Numbers before text, None last, whatever the mix in a column."""
    if value is None:
        return (2, 0)
    if isinstance(value, bool):
        return (0, int(value))
    if isinstance(value, int | float):
        return (0, value)
    return (1, str(value).lower())


class RowTable(DataTable[Drawn]):
    """Rows as dicts with a stable key; `s` sorts by the next column, `S` reverses; rows
    `pinned` says yes to (a total) stay last, in their order, whatever the sort."""

    BINDINGS = [  # noqa: RUF012 (Textual reads class-level bindings)
        Binding("s", "sort_next", "Sort"),
        Binding("S", "sort_reverse", "Reverse sort", show=False),
    ]

    class Resorted(Message):
        """The sort column or direction changed (the screen may say so)."""

    def __init__(self, columns: Sequence[Col], key: Callable[[Row], str], *,
                 sort_by: str | None = None, reverse: bool = False,
                 pinned: Callable[[Row], bool] | None = None, id: str | None = None) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, id=id)
        self.spec = list(columns)
        self.key_of = key
        keys = [c.key for c in self.spec]
        self.sort_index = keys.index(sort_by) if sort_by in keys else 0
        self.reverse = reverse
        self.pinned = pinned
        self.filter_text = ""
        self.all_rows: list[Row] = []
        self._shown: list[str] = []
        self._cells_drawn: dict[str, tuple[Drawn, ...]] = {}
        self._by_key: dict[str, Row] = {}
        self._rows_drawn: dict[str, Row] = {}
        self._generation = 0  # of the rows' rebuilds: a fill of an older one stops
        self._filled = 0  # rows of `_shown` added to the table so far

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        for i, col in enumerate(self.spec):
            mark = (" ▼" if self.reverse else " ▲") if i == self.sort_index else ""
            self.add_column(col.label + mark, key=col.key)

    # ------------------------------------------------------------------ data

    def show(self, rows: Sequence[Row]) -> None:
        """Replace the rows (filter, sort and cursor are kept)."""
        self.all_rows = list(rows)
        self._draw()

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip().lower()
        self._draw()

    def shown_rows(self) -> list[Row]:
        """The rows shown, filtered and sorted."""
        rows = self.all_rows
        if self.filter_text:
            needle = self.filter_text
            rows = [r for r in rows
                    if any(needle in c.cell(r).plain.lower() for c in self.spec)]
        col = self.spec[self.sort_index]
        field = col.sort_on or col.key
        ordered = sorted(rows, key=lambda r: sort_key(r.get(field)), reverse=self.reverse)
        if self.pinned is None:
            return ordered
        pinned = self.pinned
        return [r for r in ordered if not pinned(r)] + [r for r in rows if pinned(r)]

    @property
    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        row = self.cursor_coordinate.row
        return self._shown[row] if 0 <= row < len(self._shown) else None

    @property
    def selected(self) -> Row | None:
        key = self.selected_key
        return self._by_key.get(key) if key is not None else None

    def row_by_key(self, key: str) -> Row | None:
        return self._by_key.get(key)

    def _draw(self, *, columns_changed: bool = False) -> None:
        keep = self.selected_key
        rows = self.shown_rows()
        keys = [self.key_of(r) for r in rows]
        before, drawn = self._rows_drawn, self._cells_drawn

        def cells_of(k: str) -> tuple[Drawn, ...]:
            r = self._by_key[k]
            return self._cells(r, drawn.get(k) if before.get(k) == r else None)

        self._by_key = dict(zip(keys, rows, strict=True))
        # copies: a screen may change a row it showed (as it was drawn is what counts)
        self._rows_drawn = {k: dict(r) for k, r in self._by_key.items()}
        if keys == self._shown and not columns_changed:
            # the rows added so far are updated; a fill still under way adds the others
            # from these rows
            cells = {k: cells_of(k) for k in keys[:self._filled]}
            columns = list(self.ordered_columns)
            changed: list[tuple[str, str, Drawn]] = []
            for k, new in cells.items():
                old = drawn.get(k)
                if old == new:
                    continue
                for i, col in enumerate(self.spec):
                    if old is None or old[i] != new[i]:
                        changed.append((k, col.key, new[i]))
                        column = columns[i]
                        column.content_width = max(column.content_width, width(new[i].plain))
            self._update_cells(changed)
            self._cells_drawn = cells
            return
        self.clear(columns=columns_changed)
        if columns_changed:
            self._add_columns()
        for column in self.ordered_columns:
            column.content_width = width(column.label.plain)
        self._shown = keys
        self._cells_drawn = {}
        self._filled = 0
        self._generation += 1
        at = keys.index(keep) if keep in keys else 0
        self._append(max(FIRST_ROWS, at + FIRST_ROWS), cells_of)
        if keep in keys:
            self.move_cursor(row=at, animate=False)
        if self.filling:
            self.call_after_refresh(self._fill, self._generation)

    def _append(self, n: int, cells_of: Callable[[str], tuple[Drawn, ...]]) -> None:
        """Add the next `n` rows of `_shown`: make their cells, widen the columns to them."""
        keys = self._shown[self._filled:self._filled + n]
        cells = {k: cells_of(k) for k in keys}
        if cells:
            for i, column in enumerate(self.ordered_columns):
                column.content_width = max(column.content_width,
                                           *(width(c[i].plain) for c in cells.values()))
        self._add_rows(keys, cells)
        self._cells_drawn.update(cells)
        self._filled += len(keys)

    def _fill(self, generation: int) -> None:
        """Add the next `FILL_ROWS` rows of a rebuild (none if another rebuild came since),
        as the rows are now (a refresh may have changed them since the rebuild)."""
        if generation != self._generation:
            return
        self._append(FILL_ROWS, lambda k: self._cells(self._by_key[k], None))
        if self.filling:
            self.call_after_refresh(self._fill, generation)

    @property
    def filling(self) -> bool:
        """Whether rows of the last rebuild are still to be added (see `FIRST_ROWS`)."""
        return self._filled < len(self._shown)

    def _cells(self, row: Row, same: tuple[Drawn, ...] | None) -> tuple[Drawn, ...]:
        """The row's cells; `same`: its cells of the last draw, when the row has not changed
        since (kept, but for the cells drawn from more than the row, e.g. a sparkline)."""
        if same is None:
            return tuple(c.cell(row) for c in self.spec)
        return tuple(old if c.of_row is None else c.cell(row)
                     for c, old in zip(self.spec, same, strict=True))

    # DataTable's add_row and update_cell, once for many rows or cells: per call they list
    # the ordered columns (twice), set the cursor (a reactive) and ask for a repaint, which
    # for 13,000 rows cost more than making their cells.

    def _add_rows(self, keys: Sequence[str], cells: dict[str, tuple[Drawn, ...]]) -> None:
        """`add_row(*cells[k], key=k)` for each of `keys`, in order."""
        columns = [c.key for c in self.ordered_columns]
        start = self.row_count
        for i, k in enumerate(keys):
            row_key = RowKey(k)
            if row_key in self._row_locations:
                raise DuplicateKey(f"The row key {row_key!r} already exists.")
            self._row_locations[row_key] = start + i
            self._data[row_key] = dict(zip(columns, cells[k], strict=True))
            self.rows[row_key] = TableRow(row_key, 1)
            self._new_rows.add(row_key)
        if not keys:
            return
        self._require_update_dimensions = True
        self.cursor_coordinate = self.cursor_coordinate
        if start == 0 and self.columns and self.show_cursor and self.cursor_type != "none":
            self._highlight_cursor()  # as add_row does for a table's first row
        self._update_count += 1
        self.check_idle()

    def _update_cells(self, changed: Sequence[tuple[str, str, Drawn]]) -> None:
        """`update_cell(row, column, value)` for each of `changed`, with one repaint."""
        if not changed:
            return
        for row, column, value in changed:
            self._data[RowKey(row)][ColumnKey(column)] = value
        self._update_count += 1
        self.refresh()

    # ------------------------------------------------------------------ widths
    # Every cell here is plain single-line Text: `_draw` sets the column widths from the
    # cells' text when it adds or changes them, so DataTable's own measuring of each
    # rendered cell (on idle, for new and updated cells) is not needed.

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        width = sum(c.get_render_width(self) for c in self.columns.values())
        header = self.header_height if self.show_header else 0
        self.virtual_size = Size(width + self._row_label_column_width,
                                 self._total_row_height + header)

    def _update_column_widths(self, updated_cells: set[CellKey]) -> None:
        self._require_update_dimensions = True

    # ------------------------------------------------------------------ actions

    def action_sort_next(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(self.spec)
        self.reverse = False
        self._draw(columns_changed=True)
        self.post_message(self.Resorted())

    def action_sort_reverse(self) -> None:
        self.reverse = not self.reverse
        self._draw(columns_changed=True)
        self.post_message(self.Resorted())

    @property
    def sort_label(self) -> str:
        return f"{self.spec[self.sort_index].label} {'▼' if self.reverse else '▲'}"

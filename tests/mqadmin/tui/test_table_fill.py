"""`RowTable` on many rows: a rebuild adds the first screenful at once and the rest after
the screen was painted, a chunk at a time; keys work meanwhile, other keys during the fill
start over, and a refresh of the same rows (during the fill too) only updates cells."""

from __future__ import annotations

from textual.app import App, ComposeResult

from mqadmin.tui.widgets.table import FILL_ROWS, FIRST_ROWS, Col, Row, RowTable

N = FIRST_ROWS + 2 * FILL_ROWS + 7


def rows(n: int, lag: int = 0) -> list[Row]:
    return [{"name": f"t{i:05d}", "lag": i + lag} for i in range(n)]


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield RowTable([Col("name", "name"), Col("lag", "lag")], key=lambda r: str(r["name"]))


async def test_the_first_rows_come_at_once_and_the_rest_after_each_paint() -> None:
    app = TableApp()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(RowTable)
        table.focus()
        table.show(rows(N))
        assert table.row_count == FIRST_ROWS and table.filling
        await pilot.press("down", "down")  # keys work while the rest is added
        assert table.selected_key == "t00002"
        added = table.row_count
        table.show(rows(N, lag=1))  # a refresh during the fill: no rebuild, the fill goes on
        assert table.row_count == added and table.get_row_at(0)[1].plain == "1"
        while table.filling:
            await pilot.pause()
        assert table.row_count == N
        assert table.get_row_at(N - 1)[0].plain == f"t{N - 1:05d}"
        assert table.get_row_at(N - 1)[1].plain == f"{N:,}"  # the refreshed row
        assert table.ordered_columns[1].content_width == len(f"{N:,}")
        assert table.selected_key == "t00002"

        table.show(rows(N, lag=2))  # the same keys: cells updated in place, no rebuild
        assert not table.filling and table.row_count == N
        assert table.get_row_at(N - 1)[1].plain == f"{N + 1:,}"


async def test_a_draw_during_the_fill_starts_over_and_keeps_the_cursor_row() -> None:
    app = TableApp()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(RowTable)
        table.show(rows(N))
        table.move_cursor(row=150)
        table.show(rows(N)[1:])  # other keys while filling: rebuilt around the cursor
        assert table.selected_key == "t00150"
        assert table.row_count == 149 + FIRST_ROWS
        while table.filling:
            await pilot.pause()
        assert table.row_count == N - 1
        assert [table.get_row_at(i)[0].plain for i in (0, N - 2)] == ["t00001",
                                                                     f"t{N - 1:05d}"]

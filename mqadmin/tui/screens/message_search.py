"""Messages: search a topic over a store-time range (newest first, in pages), by key or by
id (either kind: the screen says which it was); Enter opens a message's detail.

How this works: the screen's refresh loop only reads the topic names (the search form
suggests them) and shows the banner when the cluster is unreachable; a search runs in its
own worker when asked for (`t`, `k`, `i`, `n`, `p`), posts `Searched`, and the screen keeps
the cursors of the pages before the one shown, which is how `p` goes back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from engine.client.admin import MQAdmin
from mqadmin.exit_codes import message_for
from mqadmin.operations.times import format_time
from mqadmin.tui.data.message_search import (
    PAGE,
    IdSearch,
    KeySearch,
    MessageList,
    NewestCursor,
    Search,
    TopicSearch,
    list_rows,
    search,
    topic_names,
)
from mqadmin.tui.events import Searched
from mqadmin.tui.screens.base import DashScreen
from mqadmin.tui.screens.message_detail import MessageDetailScreen
from mqadmin.tui.screens.search_form import SearchForm
from mqadmin.tui.widgets.table import Col, RowTable

HINT = "t search a topic over a time range · k by key · i by id (message id or offset " \
       "message id)"


@dataclass(frozen=True, slots=True)
class _Result:
    what: Search
    page: int  # 0: the newest
    found: MessageList


class MessageSearchScreen(DashScreen):
    TITLE: ClassVar[str] = "Messages"
    REFRESH_EVERY: ClassVar[float] = 30.0
    #: Messages a topic page shows.
    PAGE_SIZE: ClassVar[int] = PAGE
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "search('topic')", "Search a topic"),
        Binding("k", "search('key')", "Search by key"),
        Binding("i", "search('id')", "Search by id (either kind)"),
        Binding("n", "page(1)", "Older page"),
        Binding("p", "page(-1)", "Newer page"),
        Binding("enter", "open", "Message", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.topics: list[str] = []
        self.what: Search | None = None
        #: The cursors of the pages shown so far: cursors[i] starts page i (None: the newest).
        self.cursors: list[NewestCursor | None] = [None]
        self.page = 0
        self.result: MessageList | None = None
        self.searching = False

    def body(self) -> ComposeResult:
        yield Static("Nothing searched yet.", id="search-line")
        yield RowTable([
            Col("storeTime", "stored", sort_on="storedMs"), Col("topic", "topic"),
            Col("queue", "broker:queue"), Col("queueOffset", "offset"),
            Col("tags", "tags"), Col("keys", "keys"), Col("size", "bytes"),
            Col("msgId", "message id"), Col("preview", "body"),
        ], key=lambda r: str(r["key"]), sort_by="storeTime", reverse=True, id="messages")
        yield Static(HINT, id="summary", classes="panel")

    async def fetch(self, admin: MQAdmin) -> list[str]:
        return await topic_names(admin)

    def present(self, data: list[str]) -> None:
        self.topics = data

    # ------------------------------------------------------------------ searching

    def _last(self, kind: str) -> dict[str, str]:
        """The form's fields as last searched (an id search is not narrowed to the topic
        of another kind of search)."""
        what = self.what
        if kind == "id" and not isinstance(what, IdSearch):
            return {}
        if isinstance(what, TopicSearch):
            return {"topic": what.topic, "from": format_time(what.begin) or "",
                    "until": format_time(what.end) or ""}
        if isinstance(what, KeySearch):
            return {"topic": what.topic, "key": what.key}
        if isinstance(what, IdSearch):
            return {"topic": what.topic or "", "id": what.msg_id}
        return {}

    def action_search(self, kind: str) -> None:
        self.app.push_screen(SearchForm(kind, self.topics, self._last(kind)), self.start)

    def start(self, what: Search | None) -> None:
        """Search anew (page 0)."""
        if what is None:
            return
        self.what = what
        self.cursors = [None]
        self.page = 0
        self.run_search(what, 0, None)

    def action_page(self, step: int) -> None:
        if not isinstance(self.what, TopicSearch) or self.result is None or self.searching:
            return
        page = self.page + step
        if page < 0:
            self.notify("This is the newest page.")
            return
        if step > 0 and self.result.next is None:
            self.notify("No older messages in this range.")
            return
        if page >= len(self.cursors):
            self.cursors.append(self.result.next)
        self.run_search(self.what, page, self.cursors[page])

    @work(exclusive=True, group="search")
    async def run_search(self, what: Search, page: int, cursor: NewestCursor | None) -> None:
        self.searching = True
        self.query_one("#summary", Static).update(f"Searching {_describe(what)}…")
        try:
            found = await self.dashboard.backend.call(
                lambda admin: search(admin, what, cursor, self.PAGE_SIZE))
        except Exception as exc:
            self.post_message(Searched(what, message_for(exc)))
        else:
            self.post_message(Searched(_Result(what, page, found)))

    def on_searched(self, message: Searched) -> None:
        message.stop()
        self.searching = False
        line = self.query_one("#search-line", Static)
        if message.error:
            if message.data != self.what:
                return
            self.result = None
            self.query_one(RowTable).show([])
            line.update(f"Searching {_describe(message.data)} failed: {message.error}")
            line.add_class("error")
            self.query_one("#summary", Static).update(HINT)
            return
        result: _Result = message.data
        if result.what != self.what:
            return  # an earlier search, answered after the one asked for since
        self.page = result.page
        self.result = result.found
        line.update(self._heading(result))
        line.remove_class("error")
        table = self.query_one(RowTable)
        table.show(list_rows(result.found))
        table.focus()
        self.query_one("#summary", Static).update(self._summary(result))
        # an id names one message (its first copy is the original); a key may name several
        messages = result.found.messages
        if messages and (isinstance(result.what, IdSearch) or (
                isinstance(result.what, KeySearch) and len(messages) == 1)):
            self.app.push_screen(MessageDetailScreen(messages[0], result.found.id_kind))

    def _heading(self, result: _Result) -> str:
        found = result.found
        if isinstance(result.what, TopicSearch):
            return f"{found.title}: page {result.page + 1}"
        if isinstance(result.what, IdSearch):
            copies = len(found.messages)
            more = f" ({copies} stored copies: the original first, then retry and " \
                   "dead-letter copies)" if copies > 1 else ""
            return f"Found by {found.title}{more}"
        return found.title

    def _summary(self, result: _Result) -> str:
        n = len(result.found.messages)
        if isinstance(result.what, TopicSearch):
            older = "n older page · " if result.found.next is not None else \
                "the oldest page of the range · "
            newer = "p newer page · " if result.page > 0 else ""
            return f"{n} messages.  {older}{newer}Enter: the message · {HINT}"
        if not n:
            return f"No message found.  {HINT}"
        return f"{n} messages.  Enter: the message · {HINT}"

    # ------------------------------------------------------------------ detail

    def action_open(self) -> None:
        row = self.query_one(RowTable).selected
        if row is None or self.result is None:
            return
        found = next((m for m in self.result.messages
                      if m.record.offset_msg_id == row["key"]), None)
        if found is not None:
            kind = self.result.id_kind
            self.app.push_screen(MessageDetailScreen(found, kind))

    def on_data_table_row_selected(self) -> None:
        self.action_open()


def _describe(what: Search) -> str:
    if isinstance(what, TopicSearch):
        return f"topic {what.topic}"
    if isinstance(what, KeySearch):
        return f"key {what.key!r} in {what.topic}"
    return f"id {what.msg_id}"

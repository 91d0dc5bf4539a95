"""The tag filter hook of reads: consume-queue tags code first, then the record itself."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from engine.protocol.message import tags_hash_code


class MessageFilter(Protocol):
    """What `MessageStore.get_message` asks of a subscription."""

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        """Decide from the consume-queue entry's tags code alone."""
        ...

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        """Decide from the whole record (SQL92 filters); True for tag filters."""
        ...


class TagsFilter:
    """RocketMQ's TAG subscription: `*` matches all, else the set of tag hash codes."""

    def __init__(self, tags: Iterable[str] | None = None) -> None:
        tag_list = [t.strip() for t in tags or () if t.strip()]
        self.match_all = not tag_list or "*" in tag_list
        self.codes = frozenset(tags_hash_code(t) for t in tag_list)

    @classmethod
    def from_expression(cls, expression: str | None) -> TagsFilter:
        """`"TagA || TagB"`, `"*"`, empty or None."""
        if not expression or expression.strip() == "*":
            return cls()
        return cls(expression.split("||"))

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        if self.match_all:
            return True
        code = tags_code & 0xFFFFFFFF
        if code & 0x80000000:
            code -= 0x100000000
        return code in self.codes

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        return True

"""Property edits of the send path: WAIT stripped (and honoured), CLUSTER set once."""

from __future__ import annotations

import pytest

from engine.broker.handlers.send import _strip_wait, _with_cluster


@pytest.mark.parametrize("props, stored, wait", [
    ("", "", True),
    ("TAGS\x01A", "TAGS\x01A", True),
    ("WAIT\x01true", "", True),
    ("WAIT\x01false\x02TAGS\x01A", "TAGS\x01A", False),
    ("TAGS\x01A\x02WAIT\x01FALSE", "TAGS\x01A", False),
    ("TAGS\x01A\x02WAIT\x01true\x02KEYS\x01k", "TAGS\x01A\x02KEYS\x01k", True),
    ("XWAIT\x01false", "XWAIT\x01false", True),  # another key ending in WAIT
])
def test_strip_wait(props: str, stored: str, wait: bool) -> None:
    assert _strip_wait(props) == (stored, wait)


def test_with_cluster() -> None:
    assert _with_cluster("", "C") == "CLUSTER\x01C"
    assert _with_cluster("TAGS\x01A", "C") == "TAGS\x01A\x02CLUSTER\x01C"
    assert _with_cluster("CLUSTER\x01old\x02TAGS\x01A", "C") == "CLUSTER\x01C\x02TAGS\x01A"

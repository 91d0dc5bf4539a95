"""`Kept`: values made once per key and kept for the next scrape, unused ones dropped."""

from __future__ import annotations

from engine.broker.metrics.kept import Kept


def test_kept_reuses_what_the_last_scrape_used_and_drops_the_rest() -> None:
    made: list[str] = []

    def make(key: str) -> dict[str, str]:
        made.append(key)
        return {"topic": key}

    kept: Kept[str, dict[str, str]] = Kept(make)
    a = kept.get("a")
    assert kept.get("a") is a and kept.get("b") == {"topic": "b"}
    kept.turn()
    assert kept.get("a") is a  # from the last scrape
    kept.turn()  # "b" was not asked for: gone
    assert len(kept) == 1
    kept.get("b")
    assert made == ["a", "b", "b"]

"""`ScrapeCache`: values made once per key and kept for the next scrape, unused ones dropped."""

from __future__ import annotations

from engine.broker.metrics.scrape_cache import ScrapeCache


def test_scrape_cache_reuses_what_the_last_scrape_used_and_drops_the_rest() -> None:
    made: list[str] = []

    def make(key: str) -> dict[str, str]:
        made.append(key)
        return {"topic": key}

    cache: ScrapeCache[str, dict[str, str]] = ScrapeCache(make)
    a = cache.get("a")
    assert cache.get("a") is a and cache.get("b") == {"topic": "b"}
    cache.end_scrape()
    assert cache.get("a") is a  # from the last scrape
    cache.end_scrape()  # "b" was not asked for: gone
    assert len(cache) == 1
    cache.get("b")
    assert made == ["a", "b", "b"]

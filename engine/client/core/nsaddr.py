"""Name-server addresses from an HTTP address server (RocketMQ's `TopAddressing`).

How this works: a GET on the address server's URL answers ``host:port;host:port`` as plain
text (line breaks are dropped).  Any failure - refused, timed out, not 200, an empty or
malformed list - is logged and returns None, so the caller keeps the list it has.  httpx is
imported on first use: its package imports its command-line tool, which loads rich and click
when they are installed, and the engine must not load those just by being imported.
"""

from __future__ import annotations

import logging

from engine.remoting.address import parse_addr_list

log = logging.getLogger(__name__)


async def fetch_namesrv_addr(url: str, timeout: float = 3.0) -> str | None:
    """The ``;``-separated name-server list the address server at `url` publishes, or None."""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=timeout) as http:
            response = await http.get(url)
    except httpx.HTTPError as exc:
        log.warning("address server %s unreachable: %s", url, exc)
        return None
    if response.status_code != 200:
        log.warning("address server %s answered HTTP %d", url, response.status_code)
        return None
    text = response.text.replace("\r", "").replace("\n", "").strip()
    try:
        addrs = parse_addr_list(text)
    except ValueError as exc:
        log.warning("address server %s published %r: %s", url, text, exc)
        return None
    if not addrs:
        log.warning("address server %s published an empty name-server list", url)
        return None
    return ";".join(addrs)

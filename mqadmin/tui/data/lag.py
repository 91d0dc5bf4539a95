"""Lag verdicts for the dashboard from the lag monitor's operations: the collector's recent
window when one runs for this cluster, else a short sampling (as `mqadmin lag status`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from engine.client.admin.cluster import MQAdmin
from mqadmin.config import Endpoint
from mqadmin.operations.lag import status as st
from mqadmin.operations.lag.sample import Known
from mqadmin.operations.lag.verdict import COMMIT_INTERVAL_MS

#: Without a collector: samples taken, and seconds between them, on each refresh.
SAMPLES = 2
SPACING = 0.5


def collector_report(endpoint: Endpoint, group: str | None = None) -> st.LagReport | None:
    """The collector's view (None when no collector wrote a cycle lately); blocking."""
    for key in endpoint.lag_keys:
        found = st.report_from_window(key, group=group)
        if found is not None:
            return found
    return None


def kept_sampling(endpoint: Endpoint) -> st.KeptSampling:
    """A sampling a screen keeps between its refreshes (see `lag_report`)."""
    return st.KeptSampling(endpoint.cluster_key, samples=SAMPLES, spacing=SPACING,
                           min_span_ms=COMMIT_INTERVAL_MS)


async def lag_report(admin: MQAdmin, endpoint: Endpoint, group: str | None = None, *,
                     kept: st.KeptSampling | None = None,
                     known: Callable[[], Awaitable[Known]] | None = None) -> st.LagReport:
    """The collector's view, else a sampling: `kept` (one sample a refresh, judged with the
    ones kept from the refreshes before, taking what `known()` holds) when the screen
    keeps one, else a fresh one."""
    found = await asyncio.to_thread(collector_report, endpoint, group)
    if found is not None:
        return found
    if kept is not None and group is None:
        return await kept.report(admin, known)
    # a sampling this short cannot tell a stuck offset from one committed every few seconds
    # (Java's and ours: every 5 s): such a queue is UNKNOWN, not STALL
    return await st.sample_report(admin, endpoint.cluster_key, group=group, samples=SAMPLES,
                                  spacing=SPACING, min_span_ms=COMMIT_INTERVAL_MS)

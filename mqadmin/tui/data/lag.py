"""Lag verdicts for the dashboard from the lag monitor's operations: the collector's recent
window when one runs for this cluster, else a short sampling (as `mqadmin lag status`)."""

from __future__ import annotations

import asyncio

from engine.client.admin import MQAdmin
from mqadmin.config import Endpoint
from mqadmin.operations.lag import status as st
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


async def lag_report(admin: MQAdmin, endpoint: Endpoint,
                     group: str | None = None) -> st.LagReport:
    found = await asyncio.to_thread(collector_report, endpoint, group)
    if found is not None:
        return found
    # a sampling this short cannot tell a stuck offset from one committed every few seconds
    # (Java's and ours: every 5 s): such a queue is UNKNOWN, not STALL
    return await st.sample_report(admin, endpoint.cluster_key, group=group, samples=SAMPLES,
                                  spacing=SPACING, min_span_ms=COMMIT_INTERVAL_MS)

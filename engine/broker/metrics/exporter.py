"""`MetricsExporter`: serves the broker's /metrics over HTTP on its event loop.

How this works: a small asyncio server (one short-lived connection per scrape, as Prometheus
scrapes) answers ``GET /metrics`` with prometheus_client's exposition of a registry holding
only `BrokerCollector`, in the Prometheus text format (0.0.4), which every scraper reads and
prometheus_client writes a quarter faster than OpenMetrics.
The collector runs on the event loop, so it reads the broker's tables while nothing changes
them and needs no lock; the metric families it returns are new objects, so the exposition
(most of a scrape's CPU on a large broker) is written in a worker thread while the loop goes
on serving clients.  The cycle collector is paused while a scrape runs (its samples die by
reference counting).  Anything other than GET /metrics gets 404 (405 for other methods).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Iterable, Iterator

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from engine.broker.metrics.collector import BrokerCollector
from engine.broker.metrics.rpc import RpcLatency, TimedDispatcher
from engine.broker.state import BrokerState
from engine.remoting.router import Router
from engine.remoting.server import PortInUseError

log = logging.getLogger("engine.broker.metrics")

READ_TIMEOUT_S = 10.0
MAX_HEAD = 16 * 1024


class MetricsPortInUseError(PortInUseError):
    """metricsPromExporterPort is taken by another process."""


class _Collected(Collector):
    """Metric families already collected, for an encoder that runs off the event loop."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cycle collector paused for a scrape.

    A scrape of a large broker makes some 20,000 samples that live until its end and die by
    reference counting; meanwhile their allocations would trigger collections of the whole
    heap (a fifth of the scrape's CPU, measured).  Nested or overlapping scrapes: the one
    that paused it resumes it.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _response(status: str, content_type: str, body: bytes) -> bytes:
    head = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode("ascii") + body


class MetricsExporter:
    """The /metrics endpoint of one broker (metricsExporterType=PROM)."""

    def __init__(self, state: BrokerState, host: str, port: int) -> None:
        self.state = state
        #: request latencies, counted by the dispatchers `timed_dispatcher` makes
        self.rpc = RpcLatency()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(state, self.rpc))
        self.host = host
        self.requested_port = port
        self.port = 0
        self._server: asyncio.Server | None = None

    def timed_dispatcher(self, router: Router) -> TimedDispatcher:
        """A dispatcher of `router`'s requests that counts them in `rpc` (rocketmq_rpc_latency)."""
        return TimedDispatcher(router, self.state, self.rpc)

    async def start(self) -> None:
        """Listen.

        Raises:
            MetricsPortInUseError: metricsPromExporterPort is taken.
        """
        try:
            self._server = await asyncio.start_server(
                self._serve, self.host, self.requested_port, reuse_address=True)
        except OSError as exc:
            if exc.errno in (98, 48, 10048):  # EADDRINUSE on Linux, macOS, Windows
                raise MetricsPortInUseError(
                    f"metrics port {self.requested_port} on {self.host} is already in use"
                ) from None
            raise
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def render(self) -> bytes:
        """The exposition of every metric now (content type `CONTENT_TYPE_LATEST`)."""
        with _no_cycle_collection():
            collected = _Collected(self.registry.collect())
            return await asyncio.to_thread(generate_latest, collected)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            writer.write(await self._answer(head))
            await asyncio.wait_for(writer.drain(), READ_TIMEOUT_S)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ConnectionError):
            pass
        finally:
            writer.close()

    async def _answer(self, head: bytes) -> bytes:
        lines = head[:MAX_HEAD].decode("latin-1").split("\r\n")
        parts = lines[0].split()
        if len(parts) != 3:
            return _response("400 Bad Request", "text/plain", b"bad request\n")
        method, target, _ = parts
        if method != "GET":
            return _response("405 Method Not Allowed", "text/plain", b"GET /metrics\n")
        if target.split("?", 1)[0] != "/metrics":
            return _response("404 Not Found", "text/plain", b"see /metrics\n")
        return _response("200 OK", CONTENT_TYPE_LATEST, await self.render())

"""A real Prometheus server for tests: started on 127.0.0.1 (free port), data under tmp_path.

Used through the `prometheus` fixture of tests/conftest.py, which skips when Debian's
`prometheus` package is not installed (CI installs it) and stops every server it started:

    server = await prometheus.start(["127.0.0.1:5557"], rule_files=[rules_yml])
    [sample] = await server.wait_for('rocketmq_topic_number', lambda r: len(r) == 1)

`wait_for` polls the HTTP API (bounded by a timeout) until the query's result satisfies the
predicate, so tests wait for the scrape they need instead of sleeping; `wait_for_alerts` does
the same with /api/v1/alerts.  More jobs than one: `jobs={"rocketmq-lag": ["127.0.0.1:5558"]}`
beside `targets` (scraped as `job`).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.ports import free_port

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
SKIP_REASON = ("prometheus is not installed (Debian: apt-get install prometheus; "
               ".ci/run installs it)")

Result = list[dict[str, Any]]


@dataclass
class PrometheusServer:
    """One running Prometheus and its HTTP API."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; the `data` of a successful answer.

        Raises:
            AssertionError: Prometheus answered with an error.
        """
        async with httpx.AsyncClient(timeout=10) as http:
            resp = await http.get(f"{self.url}/api/v1/{path}", params=params)
        body = resp.json()
        assert body.get("status") == "success", body
        return body["data"]

    async def query(self, expr: str) -> Result:
        """An instant query's result: [{"metric": {labels}, "value": [time, "text"]}, ...]."""
        data = await self.api("query", query=expr)
        result: Result = data["result"]
        return result

    async def wait_for(self, expr: str, predicate: Callable[[Result], bool],
                       timeout: float = 60.0, interval: float = 0.25) -> Result:
        """Poll `expr` until `predicate(result)` holds.

        Raises:
            TimeoutError: not within `timeout` seconds (with the last result and targets).
        """
        deadline = time.monotonic() + timeout
        result: Result = []
        while time.monotonic() < deadline:
            result = await self.query(expr)
            if predicate(result):
                return result
            await asyncio.sleep(interval)
        targets = await self.api("targets")
        raise TimeoutError(f"{expr!r} never matched in {timeout} s: last {result}; "
                           f"targets {targets.get('activeTargets')}")

    async def alerts(self) -> Result:
        """/api/v1/alerts: [{"labels": {...}, "state": "pending" | "firing", ...}, ...]."""
        data = await self.api("alerts")
        alerts: Result = data["alerts"]
        return alerts

    async def wait_for_alerts(self, predicate: Callable[[Result], bool],
                              timeout: float = 60.0, interval: float = 0.25) -> Result:
        """Poll /api/v1/alerts until `predicate(alerts)` holds.

        Raises:
            TimeoutError: not within `timeout` seconds (with the last alerts and the rules).
        """
        deadline = time.monotonic() + timeout
        alerts: Result = []
        while time.monotonic() < deadline:
            alerts = await self.alerts()
            if predicate(alerts):
                return alerts
            await asyncio.sleep(interval)
        rules = await self.api("rules")
        raise TimeoutError(f"alerts never matched in {timeout} s: last {alerts}; "
                           f"rules {rules.get('groups')}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


@dataclass
class PrometheusLauncher:
    """Starts Prometheus servers under `root`; `stop_all` ends them (the fixture calls it)."""

    root: Path
    binary: str
    servers: list[PrometheusServer] = field(default_factory=list)

    async def start(self, targets: Sequence[str], *, interval: str = "1s",
                    rule_files: Sequence[Path] = (), job: str = "rocketmq",
                    ready_timeout: float = 60.0,
                    jobs: Mapping[str, Sequence[str]] | None = None) -> PrometheusServer:
        """A Prometheus scraping `targets` (host:port, path /metrics) as `job`, and the
        targets of each of `jobs` as that job, every `interval`.

        Raises:
            RuntimeError: it exited or was not ready within `ready_timeout` (with its log).
        """
        n = len(self.servers)
        home = self.root / f"prometheus-{n}"
        home.mkdir(parents=True, exist_ok=True)
        config = {
            "global": {"scrape_interval": interval, "scrape_timeout": interval,
                       "evaluation_interval": interval},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [{"job_name": name, "metrics_path": "/metrics",
                                "static_configs": [{"targets": list(hosts)}]}
                               for name, hosts in {job: targets, **(jobs or {})}.items()],
        }
        config_path = home / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(config))
        last_error = ""
        for _ in range(3):  # the free port may be taken between choosing and binding it
            port = free_port(neighbours=())
            log_path = home / "prometheus.log"
            with log_path.open("wb") as log:
                process = subprocess.Popen(
                    [self.binary, f"--config.file={config_path}",
                     f"--storage.tsdb.path={home / 'data'}",
                     f"--web.listen-address=127.0.0.1:{port}"],
                    stdout=log, stderr=subprocess.STDOUT, cwd=home)
            server = PrometheusServer(f"http://127.0.0.1:{port}", process, log_path)
            self.servers.append(server)
            if await self._ready(server, ready_timeout):
                return server
            server.stop()
            last_error = server.log()
            if "address already in use" not in last_error:
                break
        raise RuntimeError(f"prometheus did not start:\n{last_error[-3000:]}")

    @staticmethod
    async def _ready(server: PrometheusServer, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=5) as http:
            while time.monotonic() < deadline and server.process.poll() is None:
                try:
                    if (await http.get(f"{server.url}/-/ready")).status_code == 200:
                        return True
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        return False

    def stop_all(self) -> None:
        for server in self.servers:
            server.stop()

"""The official 5.x Node.js client (npm `rocketmq-client-nodejs`): installed once, run per scenario.

How this works: the pinned client is installed with npm into a cache directory outside the
project (``$XDG_CACHE_HOME/rocketmq-client-nodejs/VERSION``, default under ``~/.cache``), once
per machine; pytest-xdist workers that start together take a file lock, and the first installs
while the others wait. A scenario is a plain CommonJS script in tests/proxy/node/, started as a
subprocess with that install on ``NODE_PATH`` and its arguments as one JSON object; it prints
one JSON object per line on stdout (``{"event": ..., ...}``) and the client's log on stderr.
Without node or npm, or when npm cannot reach its registry, the tests using `node_client`
skip, naming what is missing. ``RMQ_NODE_DEBUG=1`` adds the client's debug lines to the log a
failing scenario shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

PACKAGE = "rocketmq-client-nodejs"
VERSION = "1.0.8"
SCRIPTS = Path(__file__).resolve().parent / "node"
#: Where the client's `getDefaultLogger` writes, under HOME.
CLIENT_LOG = Path("logs", "rocketmq", "rocketmq_client_nodejs.log")
#: One request to the registry, and the whole install, give up after this long (within the
#: 120 s pytest-timeout of the test whose setup installs, or waits for another worker's install).
FETCH_TIMEOUT_MS = 30_000
INSTALL_TIMEOUT_S = 90


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / PACKAGE / VERSION


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def install(npm: str, root: Path) -> str | None:
    """Install the pinned client under `root` unless it is there; None, or why it is not.

    A failure is remembered for the rest of the test run (the pytest-xdist workers of one run
    share its id), so the workers do not each wait for an unreachable registry.
    """
    done, failed = root / "installed", root / "failed"
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
    with _locked(root.parent / f"{VERSION}.lock"):
        if done.exists() and (root / "node_modules" / PACKAGE / "package.json").exists():
            return None
        if run_id and failed.exists():
            failed_run, _, reason = failed.read_text().partition("\n")
            if failed_run == run_id:
                return reason
        root.mkdir(parents=True, exist_ok=True)
        # A package.json of its own, so npm installs here and not in a parent folder's project.
        (root / "package.json").write_text(json.dumps({"private": True}))
        reason = _npm_install(npm, root)
        if reason is None:
            failed.unlink(missing_ok=True)
            done.write_text(f"{PACKAGE}@{VERSION}\n")
        else:
            failed.write_text(f"{run_id}\n{reason}")
    return reason


def _npm_install(npm: str, root: Path) -> str | None:
    try:
        result = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--no-package-lock",
             "--fetch-retries=1", "--fetch-retry-mintimeout=2000",
             "--fetch-retry-maxtimeout=5000", f"--fetch-timeout={FETCH_TIMEOUT_MS}",
             f"{PACKAGE}@{VERSION}"],
            cwd=root, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S,
            stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        return f"npm install {PACKAGE}@{VERSION} did not finish in {INSTALL_TIMEOUT_S} s"
    if result.returncode == 0:
        return None
    errors = [line.removeprefix("npm error").strip() for line in result.stderr.splitlines()
              if line.startswith("npm error") and "complete log" not in line]
    return f"npm install {PACKAGE}@{VERSION} failed: {'; '.join(errors[:3]) or 'no output'}"


class ScenarioError(AssertionError):
    """A scenario exited badly, printed an "error" line, or did not answer in time."""


@dataclasses.dataclass
class Scenario:
    """One running script: its events as they come, its stderr for the failure message."""

    name: str
    process: asyncio.subprocess.Process
    home: Path
    events: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    async def next(self, event: str, timeout: float = 60) -> dict[str, Any]:
        """The next line whose "event" is `event` (lines before it are kept in `events`)."""
        assert self.process.stdout is not None
        while True:
            try:
                raw = await asyncio.wait_for(self.process.stdout.readline(), timeout)
            except TimeoutError:
                raise await self._failure(f"no {event!r} within {timeout} s") from None
            if not raw:
                raise await self._failure(f"exited before {event!r}")
            line = json.loads(raw)
            self.events.append(line)
            if line["event"] == event:
                return line
            if line["event"] == "error":
                raise await self._failure(f"error before {event!r}: {line}")

    async def finish(self, timeout: float = 60) -> list[dict[str, Any]]:
        """Close its stdin, read the rest of its lines, and check it exited 0."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        try:
            rest = await asyncio.wait_for(self.process.stdout.read(), timeout)
            await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            raise await self._failure(f"still running after {timeout} s") from None
        self.events += [json.loads(raw) for raw in rest.splitlines() if raw.strip()]
        if self.process.returncode != 0:
            raise await self._failure(f"exit status {self.process.returncode}")
        return self.events

    async def _failure(self, what: str) -> ScenarioError:
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        logs = [self.home / "stderr.log", self.home / CLIENT_LOG]
        text = "\n".join(path.read_text(errors="replace") for path in logs if path.exists())
        tail = "\n".join(text.splitlines()[-60:])
        return ScenarioError(f"node {self.name}: {what}; events {self.events}\n{tail}")


@dataclasses.dataclass(frozen=True, slots=True)
class NodeClient:
    node: str
    modules: Path

    @contextlib.asynccontextmanager
    async def start(self, script: str, **args: Any) -> AsyncIterator[Scenario]:
        """Start tests/proxy/node/`script` with `args`; killed on the way out if still running.

        Its HOME is a temporary folder: parts of the client log to a file under HOME whatever
        logger it is given (`getDefaultLogger`), which a failure shows beside its stderr.
        """
        with tempfile.TemporaryDirectory(prefix="rmq-node-") as home:
            env = {**os.environ, "NODE_PATH": str(self.modules), "HOME": home}
            with (Path(home) / "stderr.log").open("wb") as stderr:
                process = await asyncio.create_subprocess_exec(
                    self.node, str(SCRIPTS / script), json.dumps(args), env=env,
                    stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                    stderr=stderr, limit=1 << 20)
            try:
                yield Scenario(script, process, Path(home))
            finally:
                if process.returncode is None:
                    process.kill()
                    await process.wait()

    async def run(self, script: str, timeout: float = 60, **args: Any) -> list[dict[str, Any]]:
        """Run `script` to its end; all its events."""
        async with self.start(script, **args) as scenario:
            return await scenario.finish(timeout)


def installed_client() -> NodeClient:
    """The client, installed if need be; skips the test when it cannot be."""
    node, npm = shutil.which("node"), shutil.which("npm")
    missing = [name for name, path in (("node", node), ("npm", npm)) if path is None]
    if node is None or npm is None:
        pytest.skip(f"the Node.js client tests ({PACKAGE}@{VERSION}) need "
                    f"{' and '.join(missing)} on PATH")
    root = cache_root()
    try:
        reason = install(npm, root)
    except OSError as exc:
        reason = f"cannot install {PACKAGE}@{VERSION} under {root}: {exc}"
    if reason is not None:
        pytest.skip(reason)
    return NodeClient(node, root / "node_modules")

"""Broker processes for the HA tests: real `mqbroker` processes with stores under tmp_path.

Each `BrokerProcess` keeps its ports and store across restarts, so a test can SIGKILL a
broker and start it again on the same store.  The `brokers` fixture kills whatever is still
running when the test ends.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.remoting.client import RemotingClient
from engine.store import MessageStore
from engine.store.config import MessageStoreConfig
from tests.ha.inproc import ha_status
from tests.ports import free_port

ROOT = Path(__file__).resolve().parent.parent.parent

#: Timings that make replication react in tens of milliseconds instead of seconds.
FAST = {"haSendHeartbeatInterval": "200", "haReconnectInterval": "100",
        "slaveSyncInterval": "300", "registerNameServerPeriod": "10000",
        "mappedFileSizeCommitLog": str(256 * 1024), "mappedFileSizeConsumeQueue": "20000",
        "flushDiskType": "ASYNC_FLUSH", "slaveReadEnable": "true"}


class BrokerProcess:
    """One broker, started and stopped (or killed) as a process."""

    def __init__(self, root: Path, name: str, namesrv: str, **settings: Any) -> None:
        self.dir = root / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.settings = {"brokerName": "broker-a", "brokerClusterName": "HaCluster",
                         "brokerIP1": "127.0.0.1", "bindAddress": "127.0.0.1",
                         "listenPort": str(self.port), "namesrvAddr": namesrv,
                         "storePathRootDir": str(self.dir / "store"),
                         "logsDir": str(self.dir / "logs"), **FAST,
                         **{k: str(v) for k, v in settings.items()}}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ha_addr(self) -> str:
        return f"127.0.0.1:{self.port + 1}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def start(self) -> None:
        conf = self.dir / "broker.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in self.settings.items()))
        with open(self.dir / "output.txt", "ab") as out:
            earlier = out.tell()  # what earlier runs of this broker wrote
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "engine.broker.main", "-c", str(conf)],
                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                env={**os.environ, "HOME": str(self.dir)})
        await self._wait_listening(earlier)

    async def _wait_listening(self, earlier: int) -> None:
        """Until this run says "boot success" (it has registered with the name servers by
        then), not an earlier run of the same broker."""
        async with asyncio.timeout(30):
            while True:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise AssertionError(f"broker exited with {self.proc.returncode}: "
                                         f"{(self.dir / 'output.txt').read_text()[-2000:]}")
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                except OSError:
                    await asyncio.sleep(0.05)
                    continue
                writer.close()
                with open(self.dir / "output.txt", "rb") as out:
                    out.seek(earlier)
                    if b"boot success" in out.read():
                        return
                await asyncio.sleep(0.05)

    async def stop(self) -> None:
        """SIGTERM and wait: the broker unregisters and shuts its store down cleanly."""
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(self.proc.wait, 30)

    def kill(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(30)

    def open_store(self) -> MessageStore:
        """The stopped broker's store, loaded (for comparisons)."""
        cfg = MessageStoreConfig(
            store_path_root_dir=str(self.dir / "store"),
            mapped_file_size_commit_log=int(self.settings["mappedFileSizeCommitLog"]),
            mapped_file_size_consume_queue=int(self.settings["mappedFileSizeConsumeQueue"]))
        store = MessageStore(cfg)
        store.load()
        return store

    def log_text(self) -> str:
        return (self.dir / "output.txt").read_text()


async def wait_for_slave(client: RemotingClient, master: BrokerProcess) -> None:
    """Until the master has a slave connected."""
    async with asyncio.timeout(20):
        while not (await ha_status(client, master.addr)).ha_connection_info:
            await asyncio.sleep(0.05)


@pytest.fixture
def brokers() -> Iterator[list[BrokerProcess]]:
    """Register every BrokerProcess a test makes here; they are killed at the end."""
    made: list[BrokerProcess] = []
    yield made
    for broker in made:
        broker.kill()

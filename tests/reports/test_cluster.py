"""The report on a real standalone Spark cluster (a master and a worker from the pyspark
package, on loopback, ports from the OS), submitted with spark-submit from its bundle:
the same summary as in local mode."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mqadmin.reports import bundle
from tests.reports.conftest import JVM_OPTIONS

#: Spark is slow to start on a busy machine: the session fixture counts here.
pytestmark = pytest.mark.timeout(900)

BIN = Path(sys.executable).parent
SPARK_CLASS = BIN / "spark-class"


class Daemon:
    """A Spark daemon in its own process group; its log lines are read by a thread."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([str(SPARK_CLASS), *args], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, env=env,
                                     start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.log: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            self.lines.put(line)

    def wait_for(self, pattern: str, timeout: float = 90) -> re.Match[str]:
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no {pattern!r} in:\n{''.join(self.log)}") from None
            found = re.search(pattern, line)
            if found:
                return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # The daemons, and the driver and executor of every spark-submit, start their JVMs with
    # the tests' options (spark-submit reads spark-defaults.conf from SPARK_CONF_DIR).
    conf = tmp_path / "spark-conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        f"spark.driver.extraJavaOptions {JVM_OPTIONS}\n"
        f"spark.executor.extraJavaOptions {JVM_OPTIONS}\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(tmp_path),
           "SPARK_WORKER_DIR": str(tmp_path / "work"), "SPARK_LOG_DIR": str(tmp_path),
           "PYSPARK_PYTHON": sys.executable, "SPARK_DAEMON_JAVA_OPTS": JVM_OPTIONS}
    master = Daemon(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", "0", "--webui-port", "0"], env)
    worker = None
    try:
        url = master.wait_for(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)").group(1)
        worker = Daemon(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                         "--port", "0", "--webui-port", "0", "--cores", "1", "--memory",
                         "1g", "--work-dir", str(tmp_path / "work"), url], env)
        worker.wait_for(r"Successfully registered with master")
        yield url
    finally:
        if worker is not None:
            worker.stop()
        master.stop()


def _comparable(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "generated_at"}


def test_spark_submit_to_a_standalone_cluster_gives_the_local_summary(
        cluster: str, history: tuple[Path, Any], report: tuple[Path, dict[str, Any]],
        report_home: Path, tmp_path: Path) -> None:
    archive, entry = bundle.bundle(tmp_path / "bundle")
    out = tmp_path / "out"
    cmd = [str(BIN / "spark-submit"), "--master", cluster, "--py-files", str(archive),
           "--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.sql.shuffle.partitions=2", str(entry),
           "--input", str(history[0]), "--out", str(out), "--date", "2026-11-23",
           "--slo", str(report_home / "slo.toml"), "--no-charts"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().endswith(str(out))
    on_cluster = json.loads((out / "summary.json").read_text())
    assert _comparable(on_cluster) == _comparable(report[1])
    assert {p.name for p in out.iterdir()} == {"summary.json", "summary.parquet", "summary.csv"}

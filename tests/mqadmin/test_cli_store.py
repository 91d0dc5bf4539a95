"""Store upkeep commands through CliRunner against a live broker with tiny commit-log
segments, ``-o json`` parsed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mqadmin import history
from mqadmin.exit_codes import ExitCode

from .cli import invoke, json_rows, rows_of
from .conftest import BackgroundCluster, start_cluster

SEGMENT = 1024 * 1024  # broker_configs' commit-log segment size


@pytest.fixture
def expiring(tmp_path: Path) -> Iterator[BackgroundCluster]:
    """A broker whose commit-log files expire at once (fileReservedTime=0), whose cleanup
    runs every 50 ms but never by the clock (deleteWhen names no hour)."""
    running = start_cluster(tmp_path, file_reserved_time=0, clean_resource_interval=50,
                            delete_when="99")
    try:
        yield running
    finally:
        running.stop()


def fill_two_segments(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Bulk", queues=1)
    for _ in range(20):
        cluster.send("Bulk", b"x" * 64 * 1024)


def runtime(cluster: BackgroundCluster) -> dict[str, str]:
    return {r["key"]: r["value"] for r in json_rows("brokerStatus", "-b", cluster.broker_addr,
                                                     "-n", cluster.ns)}


def test_delete_expired_commit_log_dry_run_lists_the_files(expiring: BackgroundCluster) -> None:
    fill_two_segments(expiring)
    result = invoke("deleteExpiredCommitLog", "-b", expiring.broker_addr, "--dry-run",
                    "-n", expiring.ns, "-o", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert (row["broker"], row["file"], row["fromOffset"], row["toOffset"], row["bytes"],
            row["expired"]) == (expiring.broker_addr, "0" * 20, 0, SEGMENT, SEGMENT, True)
    assert row["lastWritten"]
    assert "1 segment(s) go" in result.stderr and "dry run" in result.stderr
    assert runtime(expiring)["commitLogMinOffset"] == "0"
    assert history.records() == []


def test_delete_expired_commit_log(expiring: BackgroundCluster) -> None:
    fill_two_segments(expiring)
    result = invoke("deleteExpiredCommitLog", "-c", "DefaultCluster", "--wait", "20", "--yes",
                    "-n", expiring.ns, "-o", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert row["verified"] is True and row["result"] == "cleanup started"
    assert row["after"].startswith("1 segment(s), offsets 1048576..")
    assert runtime(expiring)["commitLogMinOffset"] == str(SEGMENT)
    assert history.records()[0]["command"] == "deleteExpiredCommitLog"


def test_nothing_expired_is_verified_at_once(cluster: BackgroundCluster) -> None:
    result = invoke("deleteExpiredCommitLog", "-b", cluster.broker_addr, "--yes",
                    "-n", cluster.ns, "-o", "json")
    assert result.exit_code == 0, result.stderr
    [row] = rows_of(result)
    assert row["verified"] is True
    assert "nothing expired" in result.stderr


def test_clean_expired_cq_and_unused_topic(cluster: BackgroundCluster) -> None:
    for command in ("cleanExpiredCQ", "cleanUnusedTopic"):
        result = invoke(command, "-c", "DefaultCluster", "--yes", "-n", cluster.ns, "-o",
                        "json")
        assert result.exit_code == 0, result.stderr
        [row] = rows_of(result)
        assert (row["broker"], row["result"], row["verified"]) == (
            cluster.broker_addr, "OK", True)
    assert [r["command"] for r in history.records()] == ["cleanExpiredCQ", "cleanUnusedTopic"]
    unknown = invoke("cleanExpiredCQ", "-c", "NoSuchCluster", "--yes", "-n", cluster.ns)
    assert unknown.exit_code == ExitCode.NOT_FOUND

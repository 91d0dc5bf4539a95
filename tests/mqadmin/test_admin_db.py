"""The admin database shared by the audit log, the DLQ ledger, the lag window and the report
runs: opened for the first time by several of them at once (the dashboard's header reading
the ledger while a change is audited, a collector beside a CLI), each one waits for the
others and nothing is lost."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from mqadmin import history, report_runs
from mqadmin.operations.dlq.ledger import Ledger
from mqadmin.operations.lag.window import open_db as open_window


def audit() -> None:
    history.append(history.AuditRecord("updateTopic", {}, "T", "applied", 0, [], []))


def ledger() -> None:
    with Ledger("cluster") as opened:
        assert opened.batches("group") == []


def window() -> None:
    open_window().close()


def report_run() -> None:
    report_runs.start(kind="daily", period="day", period_from="a", period_to="b",
                      trigger="cli", attempt=1, master="local[1]", input_path="in")


def all_at_once(works: list[Callable[[], None]]) -> list[BaseException]:
    start = threading.Barrier(len(works))
    errors: list[BaseException] = []

    def guarded(work: Callable[[], None]) -> None:
        start.wait()
        try:
            work()
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(work,)) for work in works]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_first_opened_by_four_at_once_each_writes(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for round_ in range(20):
        monkeypatch.setenv("MQADMIN_HOME", str(tmp_path / f"home{round_}"))  # a new file
        errors = all_at_once([audit, ledger, window, report_run])
        assert errors == [], f"round {round_}: {errors}"
        assert [r["command"] for r in history.records()] == ["updateTopic"]
        assert len(report_runs.records()) == 1

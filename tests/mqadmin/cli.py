"""Running mqadmin through CliRunner and reading its output back."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

from typer.testing import CliRunner, Result

from mqadmin.app import app, command
from mqadmin.exit_codes import ExitCode

runner = CliRunner(env={"NAMESRV_ADDR": None})


def invoke(*args: str, input: str | None = None, env: dict[str, str | None] | None = None
           ) -> Result:
    """mqadmin's whole app, run as typer's CliRunner runs it, but with the click command
    built once per process (`mqadmin.app.command`): typer would build it again for each run,
    80 ms each, most of the CPU of the suite's in-process commands."""
    with mock.patch("typer.testing._get_command", lambda _app: command()):
        return runner.invoke(app, list(args), input=input, env=env)


def rows_of_any(result: Result) -> list[dict[str, Any]]:
    rows = json.loads(result.stdout)
    assert isinstance(rows, list)
    return rows


def rows_of(result: Result) -> list[dict[str, Any]]:
    """The JSON rows of a command that succeeded (or partly succeeded)."""
    assert result.exit_code in (0, ExitCode.PARTIAL), (result.exit_code, result.stderr)
    return rows_of_any(result)


def json_rows(*args: str) -> list[dict[str, Any]]:
    """Run a read command with ``-o json``; its rows (exit code 0 required)."""
    result = invoke(*args, "--output", "json")
    assert result.exit_code == 0, (result.exit_code, result.stderr)
    return rows_of_any(result)


def text_rows(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """JSON rows as CSV and table text show them."""
    def text(v: Any) -> str:
        if v is None:
            return ""
        if isinstance(v, dict | list):
            return json.dumps(v, ensure_ascii=False)
        return ("true" if v else "false") if isinstance(v, bool) else str(v)
    return [{k: text(v) for k, v in row.items()} for row in rows]


def parse_plain_table(out: str) -> list[dict[str, str]]:
    """Read the piped table back, cutting each line at the header's column starts."""
    header, *lines = out.splitlines()
    names = header.split()
    starts = [header.index(name) for name in names]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return [{name: line[a:b].strip() for name, (a, b) in zip(names, bounds, strict=True)}
            for line in lines]

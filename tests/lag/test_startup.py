"""A plain command starts without the heavy libraries of the lag monitor and the reports:
they are imported where they are used (pyarrow on the first history flush, httpx for a
webhook, pyspark, numpy and matplotlib in the report job), not when mqadmin starts."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pyarrow", "numpy", "httpx", "pyspark", "matplotlib", "sqlite_utils", "textual")


def loaded_by(code: str) -> list[str]:
    """The HEAVY modules in sys.modules after running `code` in a fresh interpreter."""
    probe = (f"{code}\nimport sys\n"
             f"print('loaded:', *(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=120)
    return done.stdout.splitlines()[-1].split()[1:]


def test_importing_the_app_loads_none_of_them() -> None:
    assert loaded_by("import mqadmin.app") == []


def test_a_plain_command_loads_none_of_them() -> None:
    code = ("from mqadmin.app import main\n"
            "assert main(['clusterList', '--help']) == 0\n"
            "assert main(['lag', 'status', '--help']) == 0")
    assert loaded_by(code) == []

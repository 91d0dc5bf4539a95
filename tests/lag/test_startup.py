"""A plain command starts without the heavy libraries of the lag monitor and the reports:
they are imported where they are used (pyarrow on the first history flush, httpx for a
webhook, pyspark, numpy and matplotlib in the report job), not when mqadmin starts; and
`main()` loads only the command module it runs (mqadmin.app.OWNER, checked here)."""

from __future__ import annotations

import importlib
import subprocess
import sys

from mqadmin.app import MOUNTS, OWNER

HEAVY = ("pyarrow", "numpy", "httpx", "pyspark", "matplotlib", "sqlite_utils", "textual")


def loaded_by(code: str, watched: tuple[str, ...] = HEAVY) -> list[str]:
    """The `watched` modules in sys.modules after running `code` in a fresh interpreter."""
    probe = (f"{code}\nimport sys\n"
             f"print('loaded:', *(m for m in {watched!r} if m in sys.modules))")
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


def test_a_command_loads_only_its_own_module() -> None:
    others = tuple(f"mqadmin.commands.{m}" for m, _g, _p in MOUNTS)
    code = "from mqadmin.app import main\nassert main(['clusterList', '--help']) == 0"
    assert loaded_by(code, others) == ["mqadmin.commands.cluster"]


def test_owner_names_every_command_and_group() -> None:
    found = {}
    for module, group, _panel in MOUNTS:
        sub = importlib.import_module(f"mqadmin.commands.{module}").app
        for name in [group] if group else [c.name for c in sub.registered_commands]:
            assert name is not None and name not in found, name
            found[name] = module
    assert found == OWNER

"""The layering rules of design.md, checked: engine never pulls in the console's libraries, and
the console's layers import only downward (commands and dashboard over operations)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN_IN_ENGINE = ("typer", "rich", "textual", "mqadmin", "click", "pyspark")
#: The dashboard shows what the operations read; the CLI is its sibling, not its base.
FORBIDDEN_IN_TUI = ("mqadmin.commands", "typer", "click")
#: The dashboard's data layer reads; drawing (rich, textual) is the widgets' and screens'.
FORBIDDEN_IN_TUI_DATA = ("rich", "textual")
#: Operations read and change the cluster; how it is shown is the CLI's and the dashboard's.
FORBIDDEN_IN_OPERATIONS = ("mqadmin.commands", "mqadmin.tui", "typer", "click", "rich",
                           "textual")


def test_importing_engine_loads_no_console_library() -> None:
    code = (
        "import sys, importlib, pkgutil, engine\n"
        "for m in pkgutil.walk_packages(engine.__path__, 'engine.'):\n"
        "    if not m.name.endswith('__main__'):\n"
        "        importlib.import_module(m.name)\n"
        f"bad = [m for m in {FORBIDDEN_IN_ENGINE!r} if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == ""


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            # `from mqadmin import commands` imports mqadmin.commands too
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_protocol_does_no_io_and_store_does_not_use_remoting() -> None:
    for path in (ROOT / "engine" / "protocol").rglob("*.py"):
        bad = {n for n in _imports(path) if n.split(".")[0] in ("asyncio", "socket", "selectors")}
        assert not bad, f"{path} imports {bad}"
    for path in (ROOT / "engine" / "store").rglob("*.py"):
        bad = {n for n in _imports(path) if n.startswith("engine.remoting")}
        assert not bad, f"{path} imports {bad}"


def _forbidden(name: str, forbidden: tuple[str, ...]) -> bool:
    return any(name == f or name.startswith(f + ".") for f in forbidden)


def test_dashboard_does_not_import_the_cli() -> None:
    for path in (ROOT / "mqadmin" / "tui").rglob("*.py"):
        bad = {n for n in _imports(path) if _forbidden(n, FORBIDDEN_IN_TUI)}
        assert not bad, f"{path} imports {bad}"


def test_dashboard_data_layer_draws_nothing() -> None:
    for path in (ROOT / "mqadmin" / "tui" / "data").rglob("*.py"):
        bad = {n for n in _imports(path) if _forbidden(n, FORBIDDEN_IN_TUI_DATA)}
        assert not bad, f"{path} imports {bad}"


def test_operations_import_neither_the_cli_nor_the_dashboard_nor_their_libraries() -> None:
    for path in (ROOT / "mqadmin" / "operations").rglob("*.py"):
        bad = {n for n in _imports(path) if _forbidden(n, FORBIDDEN_IN_OPERATIONS)}
        assert not bad, f"{path} imports {bad}"


def test_importing_the_dashboard_loads_neither_the_cli_nor_typer() -> None:
    code = (
        "import sys, importlib, pkgutil, mqadmin.tui\n"
        "for m in pkgutil.walk_packages(mqadmin.tui.__path__, 'mqadmin.tui.'):\n"
        "    importlib.import_module(m.name)\n"
        "print(','.join(m for m in sys.modules if m.split('.')[0] == 'typer'\n"
        "               or m.startswith('mqadmin.commands')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == ""

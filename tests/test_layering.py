"""The layering rules of design.md, checked: engine never pulls in the console's libraries."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN_IN_ENGINE = ("typer", "rich", "textual", "mqadmin", "click", "pyspark")


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
    return names


def test_protocol_does_no_io_and_store_does_not_use_remoting() -> None:
    for path in (ROOT / "engine" / "protocol").rglob("*.py"):
        bad = {n for n in _imports(path) if n.split(".")[0] in ("asyncio", "socket", "selectors")}
        assert not bad, f"{path} imports {bad}"
    for path in (ROOT / "engine" / "store").rglob("*.py"):
        bad = {n for n in _imports(path) if n.startswith("engine.remoting")}
        assert not bad, f"{path} imports {bad}"

"""The layering rules of design.md, checked: engine never pulls in the console's libraries, the
console's layers import only downward (commands and dashboard over operations), and
engine.client's sub-packages import only downward, without cycles."""

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


#: engine.client's sub-packages and what each may import besides itself: the core under
#: everything, tracing under the producers and consumers (which send traces with a producer),
#: consumers over producers (resends to %RETRY%), admin calls over the core alone.
CLIENT_LAYERS = {
    "core": set(),
    "admin": {"core"},
    "trace": {"core"},
    "produce": {"core", "trace"},
    "consume": {"core", "trace", "produce"},
}


def _client_edges() -> list[tuple[str, str, bool]]:
    """(importer, imported, inside a function) for every import of one engine.client module by
    another, the package's own `__init__` (its lazy re-exports) left out; imports under
    TYPE_CHECKING count like any other."""
    root = ROOT / "engine" / "client"
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
               for p in root.rglob("*.py")}
    edges = []
    for name, path in modules.items():
        if path == root / "__init__.py":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        in_function = {id(n) for f in ast.walk(tree)
                       if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                       for n in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            edges.extend((name, t, id(node) in in_function)
                         for t in targets if t in modules and t != name and t != "engine.client")
    return edges


def test_client_modules_sit_in_its_sub_packages() -> None:
    loose = [p.name for p in (ROOT / "engine" / "client").glob("*.py") if p.name != "__init__.py"]
    assert not loose
    packages = {p.name for p in (ROOT / "engine" / "client").iterdir()
                if (p / "__init__.py").exists()}
    assert packages == set(CLIENT_LAYERS)


def test_client_sub_packages_import_only_downward() -> None:
    edges = _client_edges()
    assert edges  # the walk sees the imports
    bad = [(a, b) for a, b, _ in edges
           if a.split(".")[2] != b.split(".")[2]
           and b.split(".")[2] not in CLIENT_LAYERS[a.split(".")[2]]]
    assert not bad


def test_client_has_no_import_cycles_and_no_function_level_imports() -> None:
    edges = _client_edges()
    assert not [(a, b) for a, b, local in edges if local]
    graph: dict[str, set[str]] = {}
    for a, b, _ in edges:
        graph.setdefault(a, set()).add(b)
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError(" -> ".join([*path[path.index(module):], module]))
        if module in done:
            return
        for imported in sorted(graph.get(module, ())):
            visit(imported, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])

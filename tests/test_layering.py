"""The layering rules of design.md, checked: engine never pulls in the console's libraries, and
the console's layers import only downward (commands and dashboard over operations); inside
mqadmin/operations the sub-packages (lag/, dlq/, ...) and the modules beside them import one
another without a circle, and no import sits inside a function to hide one; engine.client's
sub-packages import only downward, without cycles."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

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


#: The gRPC front's layer over its sans-IO HTTP/2 (the only modules of engine/proxy/h2 that
#: may do IO or know gRPC).
H2_FRONT = ("grpc_server.py", "calls.py")


def test_the_http2_connection_does_no_io_and_knows_no_grpc() -> None:
    for path in (ROOT / "engine" / "proxy" / "h2").glob("*.py"):
        if path.name in H2_FRONT:
            continue
        bad = {n for n in _imports(path) if n.split(".")[0] in (
            "asyncio", "socket", "selectors", "ssl", "grpc", "google")
            or n.startswith("engine.proxy.h2.grpc_server") or n.startswith(
                "engine.proxy.h2.calls")}
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


OPERATIONS = ROOT / "mqadmin" / "operations"
SUBPACKAGES = sorted(p.parent.name for p in OPERATIONS.glob("*/__init__.py"))


def test_operations_import_neither_the_cli_nor_the_dashboard_nor_their_libraries() -> None:
    for path in OPERATIONS.rglob("*.py"):
        bad = {n for n in _imports(path) if _forbidden(n, FORBIDDEN_IN_OPERATIONS)}
        assert not bad, f"{path} imports {bad}"


@pytest.mark.parametrize("part", SUBPACKAGES)
def test_each_operations_subpackage_imports_no_ui(part: str) -> None:
    paths = list((OPERATIONS / part).glob("*.py"))
    assert paths and ast.get_docstring(ast.parse((OPERATIONS / part / "__init__.py").read_text()))
    for path in paths:
        bad = {n for n in _imports(path) if _forbidden(n, FORBIDDEN_IN_OPERATIONS)}
        assert not bad, f"{path} imports {bad}"


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


#: Every module of mqadmin by dotted name.
MODULES = {_module_of(p): p for p in (ROOT / "mqadmin").rglob("*.py")}


def _edges(path: Path) -> list[str]:
    """The mqadmin modules `path` imports, wherever the import statement is (a function's body
    too): `from pkg import mod` counts as pkg.mod, a package imported for its names as pkg."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{alias.name}" for alias in node.names]
            targets = [s for s in subs if s in MODULES]
            if len(targets) < len(subs):
                targets.append(node.module)
        else:
            continue
        found += [t for t in targets if t in MODULES]
    return found


def _in_scope(module: str) -> bool:
    """mqadmin's top-level modules and everything in mqadmin/operations."""
    return module.count(".") == 1 or module.startswith("mqadmin.operations.")


def _graph(node_of: Callable[[str], str]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        if not _in_scope(module):
            continue
        for target in _edges(path):
            if _in_scope(target) and node_of(target) != node_of(module):
                graph.setdefault(node_of(module), set()).add(node_of(target))
    return graph


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """A path of imports from `start` to `goal`, if there is one."""
    seen, stack = {start}, [[start]]
    while stack:
        trail = stack.pop()
        if trail[-1] == goal:
            return trail
        for nxt in sorted(graph.get(trail[-1], ())):
            if nxt not in seen:
                seen.add(nxt)
                stack.append([*trail, nxt])
    return None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    return [[a, *trail] for a in sorted(graph) for b in sorted(graph[a])
            if (trail := _reaches(graph, b, a))]


def _subpackage(module: str) -> str:
    """mqadmin.operations.lag.window -> mqadmin.operations.lag; other modules stay themselves."""
    parts = module.split(".")
    return ".".join(parts[:3]) if parts[:2] == ["mqadmin", "operations"] and len(parts) > 3 \
        else module


def test_no_circle_between_the_operations_subpackages() -> None:
    assert len(SUBPACKAGES) >= 3, SUBPACKAGES  # the scan below must see the sub-packages
    assert _cycles(_graph(_subpackage)) == []


def test_no_circle_between_mqadmin_modules_nor_an_import_in_a_function_hiding_one() -> None:
    """Counting every import (those inside functions too), mqadmin's top-level modules and
    mqadmin/operations form no circle: an import moved into a function to break a circle at
    import time still fails here."""
    assert _cycles(_graph(lambda m: m)) == []


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

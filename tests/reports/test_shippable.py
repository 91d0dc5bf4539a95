"""The report job ships alone: it imports only the standard library, pyspark, pyarrow,
matplotlib and numpy, and its bundle runs from a zip."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

from mqadmin.reports import bundle

PACKAGE = Path(bundle.__file__).parent
ALLOWED = {"pyspark", "pyarrow", "matplotlib", "numpy", "mqadmin.reports"}


def test_the_job_imports_nothing_of_engine_or_the_cli() -> None:
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top in ALLOWED \
                    or name.startswith("mqadmin.reports"), f"{path.name} imports {name}"


def test_the_bundle_imports_from_its_zip_alone(tmp_path: Path) -> None:
    archive, entry = bundle.bundle(tmp_path)
    names = set(zipfile.ZipFile(archive).namelist())
    assert {"mqadmin/__init__.py", "mqadmin/reports/job.py", "mqadmin/reports/submit.py",
            "mqadmin/reports/schema.py"} <= names
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import mqadmin.reports.job as j; "
            "assert j.__file__.startswith(sys.argv[1]), j.__file__; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('engine', 'typer', 'rich', 'textual')))")
    out = subprocess.run([sys.executable, "-S", "-c", code, str(archive)], capture_output=True,
                         text=True, cwd=tmp_path)
    # -S: no site-packages, so not even pyspark: the import must fail on pyspark, not on
    # anything of ours.
    assert "No module named 'pyspark'" in out.stderr, out.stderr
    out = subprocess.run([sys.executable, "-c", code, str(archive)], capture_output=True,
                         text=True, cwd=tmp_path, check=True)
    assert out.stdout.strip() == "[]"
    assert entry.read_text().count("from mqadmin.reports.job import main") == 1

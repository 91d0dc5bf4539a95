"""Package the report job for ``spark-submit`` on a cluster: a zip of this package (for
``--py-files``) and the entry file beside it."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
ZIP_NAME = "mqadmin-reports.zip"
ENTRY_NAME = "submit.py"


def bundle(out: Path) -> tuple[Path, Path]:
    """Write ``mqadmin-reports.zip`` and ``submit.py`` into `out`; returns both paths."""
    out.mkdir(parents=True, exist_ok=True)
    archive = out / ZIP_NAME
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("mqadmin/__init__.py", '"""mqadmin (report job only)."""\n')
        for source in sorted(PACKAGE.glob("*.py")):
            zf.write(source, f"mqadmin/reports/{source.name}")
    entry = out / ENTRY_NAME
    shutil.copyfile(PACKAGE / ENTRY_NAME, entry)
    return archive, entry


def submit_command(archive: Path, entry: Path, master: str, job_args: list[str]) -> list[str]:
    """The spark-submit command line running the bundled job on `master`."""
    return ["spark-submit", "--master", master, "--py-files", str(archive), str(entry),
            *job_args]

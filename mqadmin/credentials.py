"""Access keys per context: ``credentials.json`` beside config.toml, readable by its owner only.

How this works: config.toml stays free of secrets (it can be shared); each context's access
key and secret key live in ``$MQADMIN_HOME/credentials.json``, written with mode 0600 and
refused when its mode lets anyone else read it.  ``MQADMIN_ACCESS_KEY`` and
``MQADMIN_SECRET_KEY`` (both) override the context's.  A secret is never printed, logged or
written to the audit log; rows show the access key only.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

from engine.protocol.signature import Credentials
from mqadmin.exit_codes import UsageProblem
from mqadmin.home import home

FILE = "credentials.json"
ACCESS_KEY_ENV = "MQADMIN_ACCESS_KEY"
SECRET_KEY_ENV = "MQADMIN_SECRET_KEY"


def path() -> Path:
    return home() / FILE


def _check_mode(file: Path) -> None:
    mode = stat.S_IMODE(file.stat().st_mode)
    if mode & 0o077:
        raise UsageProblem(f"{file} holds secret keys but its mode is {mode:o}: others may "
                           f"read it. Run `chmod 600 {file}` and try again.")


def load_all() -> dict[str, Credentials]:
    """Every saved context's credentials.

    Raises:
        UsageProblem: the file is readable by others or not valid.
    """
    file = path()
    if not file.exists():
        return {}
    _check_mode(file)
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageProblem(f"cannot read {file}: {exc}; fix or remove it.") from None
    found = {}
    for name, entry in (doc.get("contexts") or {}).items() if isinstance(doc, dict) else ():
        if isinstance(entry, dict) and entry.get("accessKey") and entry.get("secretKey"):
            found[name] = Credentials(str(entry["accessKey"]), str(entry["secretKey"]))
    return found


def save_all(saved: dict[str, Credentials]) -> Path:
    """Write every context's credentials (mode 0600, atomically)."""
    file = path()
    file.parent.mkdir(parents=True, exist_ok=True)
    doc = {"contexts": {n: {"accessKey": c.access_key, "secretKey": c.secret_key}
                        for n, c in sorted(saved.items())}}
    tmp = file.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, json.dumps(doc, indent=2).encode())
    finally:
        os.close(fd)
    tmp.replace(file)
    return file


def set_context(name: str, credentials: Credentials | None) -> None:
    """Save (or, with None, forget) one context's credentials."""
    saved = load_all()
    if credentials is None:
        if saved.pop(name, None) is None:
            return
    else:
        saved[name] = credentials
    save_all(saved)


def read_secret_file(file: str) -> str:
    """The secret key in `file` (``-`` for stdin), without its trailing newline.

    Raises:
        UsageProblem: the file cannot be read or is empty.
    """
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageProblem(f"cannot read the secret key file {file}: "
                           f"{exc.strerror or exc}") from None
    secret = text.strip("\r\n")
    if not secret:
        raise UsageProblem(f"the secret key file {file} is empty.")
    return secret


def from_env() -> Credentials | None:
    """``MQADMIN_ACCESS_KEY`` + ``MQADMIN_SECRET_KEY`` when both are set.

    Raises:
        UsageProblem: only one of them is set.
    """
    ak, sk = os.environ.get(ACCESS_KEY_ENV), os.environ.get(SECRET_KEY_ENV)
    if ak and sk:
        return Credentials(ak, sk)
    if ak or sk:
        missing = SECRET_KEY_ENV if ak else ACCESS_KEY_ENV
        raise UsageProblem(f"{missing} is not set: set both {ACCESS_KEY_ENV} and "
                           f"{SECRET_KEY_ENV}, or neither.")
    return None


def for_context(name: str | None) -> Credentials | None:
    """The environment's credentials, else the context's, else None."""
    env = from_env()
    if env is not None or name is None:
        return env
    return load_all().get(name)

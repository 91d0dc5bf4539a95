"""Where mqadmin keeps its own files: ``$MQADMIN_HOME``, else ``~/.mqadmin``.

Everything under it (config.toml, credentials.json, mqadmin.db, the lag history, the
reports) is named relative to `home()`; this module depends on nothing of mqadmin, so the
modules that read those files (config, credentials, history) need not import each other.
"""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "MQADMIN_HOME"


def home() -> Path:
    """The directory of mqadmin's own files (not created here)."""
    value = os.environ.get(HOME_ENV)
    return Path(value).expanduser() if value else Path.home() / ".mqadmin"

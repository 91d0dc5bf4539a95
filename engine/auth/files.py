"""Atomic owner-only files for secrets: temp file, fsync, keep `.bak`, rename, fsync the dir."""

from __future__ import annotations

import contextlib
import os
import shutil


def write_private(path: str, data: bytes) -> None:
    """Replace `path` with `data` atomically (mode 0600); the previous content becomes `.bak`."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if os.path.exists(path) and os.path.getsize(path) > 0:
        shutil.copyfile(path, path + ".bak")
        os.chmod(path + ".bak", 0o600)
    os.replace(tmp, path)
    dfd = os.open(directory, os.O_RDONLY)
    try:
        with contextlib.suppress(OSError):
            os.fsync(dfd)
    finally:
        os.close(dfd)


def mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime_ns / 1e9
    except OSError:
        return None

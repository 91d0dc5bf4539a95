"""`MQVersion` ordinals: the `version` header field of every command."""

from __future__ import annotations

import re

# Ordinal formula from the enum (remoting.md §8): V4_x_y = 213 + 2*(10x + y),
# V5_x_y = 413 + 2*(10x + y); each `..._SNAPSHOT` is the release minus one.
V3_0_7_SNAPSHOT = 28
V3_0_11 = 37
V3_4_9 = 121
V4_1_0_SNAPSHOT = 232
V4_9_4 = 401
V4_9_7 = 407
HIGHER_VERSION = 612

#: The version this engine reports: it speaks 4.9.7's protocol.
CURRENT_VERSION = V4_9_7

_NAME = re.compile(r"^V([45])_(\d)_(\d)(_SNAPSHOT)?$")


def version_ordinal(name: str) -> int:
    """Return the wire ordinal of a 4.x/5.x version name such as ``V4_9_7``.

    Raises:
        ValueError: the name is not of the form ``V4_x_y`` / ``V5_x_y`` (optionally ``_SNAPSHOT``).
    """
    m = _NAME.match(name)
    if m is None:
        raise ValueError(f"not a 4.x/5.x version name: {name!r}")
    base = 213 if m.group(1) == "4" else 413
    ordinal = base + 2 * (10 * int(m.group(2)) + int(m.group(3)))
    return ordinal - 1 if m.group(4) else ordinal


def version_desc(ordinal: int) -> str:
    """Return the enum name for a wire ordinal (as `MQVersion.getVersionDesc` does) for 4.x/5.x."""
    if ordinal >= HIGHER_VERSION:
        return "HIGHER_VERSION"
    for major, base in (("5", 413), ("4", 213)):
        if ordinal >= base - 1:
            delta = ordinal - base
            snapshot = delta % 2 == 1
            if snapshot:
                delta += 1
            minor, patch = divmod(delta // 2, 10)
            return f"V{major}_{minor}_{patch}" + ("_SNAPSHOT" if snapshot else "")
    return f"V3({ordinal})"

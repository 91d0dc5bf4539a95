"""Permission bits of topics and brokers (`PermName`)."""

from __future__ import annotations

PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1
PERM_RW = PERM_READ | PERM_WRITE


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_inherited(perm: int) -> bool:
    return bool(perm & PERM_INHERIT)


def perm_to_string(perm: int) -> str:
    """`PermName.perm2String`: ``RWX`` with ``-`` for a missing bit."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )

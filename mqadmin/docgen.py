"""The command reference, generated from the app (``python -m mqadmin.docgen``).

How this works: typer turns the app into its command tree (`mqadmin.app.command`); each
command's help text and options are read from that tree and written as Markdown, grouped
by the help panels ``mqadmin --help`` shows.  A test compares the checked-in file with this
output, so the reference cannot drift from the code.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from enum import Enum
from typing import Any

from mqadmin.app import command as app_command

HIDDEN = frozenset({"help", "install_completion", "show_completion"})
DEFAULT_PANEL = "Commands"


def commands(group: Any, prefix: str = "mqadmin") -> Iterator[tuple[str, str, Any]]:
    """(panel, full name, command) of every command, groups expanded, in help order."""
    for name, command in group.commands.items():
        panel = getattr(command, "rich_help_panel", None) or DEFAULT_PANEL
        path = f"{prefix} {name}"
        if hasattr(command, "commands"):
            for _, sub_path, sub in commands(command, path):
                yield panel, sub_path, sub
        else:
            yield panel, path, command


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(param: Any) -> str:
    if getattr(param, "is_flag", False):
        return ""
    desc = param.type_descriptor
    if desc.is_choice:
        return "\\|".join(str(c.value if isinstance(c, Enum) else c) for c in desc.choices)
    if param.metavar:
        return _escape(str(param.metavar))
    return str(param.bare_type()).upper()


def _default(param: Any) -> str:
    if param.required:
        return "required"
    default = param.default
    if default is None or (getattr(param, "is_flag", False) and default is False):
        return ""
    if isinstance(default, Enum):
        default = default.value
    if isinstance(default, bool):
        return "true" if default else "false"
    return f"`{default}`"


def _options(command: Any) -> list[str]:
    rows = []
    for param in command.params:
        if param.name in HIDDEN:
            continue
        if param.param_type_name == "argument":
            names = f"`{(param.metavar or param.name).upper()}`"
        else:
            names = ", ".join(f"`{o}`" for o in (*param.opts, *param.secondary_opts))
        help_text = _escape(getattr(param, "help", None) or "")
        envvar = getattr(param, "envvar", None)
        if envvar:
            help_text += f" (env: `{envvar}`)"
        rows.append(f"| {names} | {_value(param)} | {_default(param)} | {help_text} |")
    if not rows:
        return []
    return ["| Option | Value | Default | Description |", "|---|---|---|---|", *rows, ""]


def render() -> str:
    """The whole reference as Markdown."""
    root = app_command()
    by_panel: dict[str, list[tuple[str, Any]]] = {}
    for panel, path, command in commands(root):
        by_panel.setdefault(panel, []).append((path, command))
    lines = [
        "# mqadmin command reference", "",
        "Generated from the app by `python -m mqadmin.docgen > docs/cli-reference.md`; do "
        "not edit by hand.", "",
        "Every command takes `-o/--output table|json|csv` (only `--output` where Apache's "
        "`-o` means something else), `--debug`, and, when it talks to a cluster, "
        "`-n/--namesrvAddr` or `--context`.  Commands that change something show their "
        "plan, ask for confirmation (or need `--yes`), verify and append to the audit log; "
        "`--dry-run` prints the plan only.  Exit codes: 0 ok, 1 error, 2 usage, 3 not "
        "found, 4 rejected by the server, 5 unreachable, 6 partial success, 130 "
        "interrupted.", "",
    ]
    for panel, found in by_panel.items():
        lines += [f"## {panel}", ""]
        for path, command in found:
            lines += [f"### `{path}`", "", (command.help or "").strip(), "",
                      f"Usage: `{path} [OPTIONS]`", "", *_options(command)]
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""mqadmin's own files and named contexts: where they live, how `-n`/`--context` resolve.

How this works: mqadmin keeps its state under one directory, ``$MQADMIN_HOME`` or
``~/.mqadmin`` (home.py): ``config.toml`` (named contexts, written by ``mqadmin context``) and
``mqadmin.db`` (the audit log, see history.py).  A context names a cluster by its
name-server list::

    current-context = "prod"

    [contexts.prod]
    namesrv = "10.0.0.1:9876;10.0.0.2:9876"

    [contexts.dev]
    namesrv = "127.0.0.1:9876"

The name servers of a command come from, in order: ``-n``; ``--context NAME``; the
``NAMESRV_ADDR`` environment variable; the current context.  The file is read with tomllib
and written by `save` (plain strings only, so no TOML writer is needed).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.protocol.signature import Credentials
from engine.remoting.address import parse_addr_list
from mqadmin import credentials
from mqadmin.exit_codes import TargetNotFound, UsageProblem
from mqadmin.home import home

NAMESRV_ENV = "NAMESRV_ADDR"
CONFIG_FILE = "config.toml"


def config_path() -> Path:
    return home() / CONFIG_FILE


@dataclass(frozen=True, slots=True)
class Context:
    """A cluster by its name servers, saved under a name."""

    name: str
    namesrv: str
    description: str = ""


@dataclass(slots=True)
class Contexts:
    """The contexts of config.toml and which one is current."""

    current: str | None = None
    contexts: dict[str, Context] = field(default_factory=dict)


def load() -> Contexts:
    """The saved contexts (none when the file does not exist).

    Raises:
        UsageProblem: the file is not valid TOML or a context lacks ``namesrv``.
    """
    path = config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Contexts()
    except OSError as exc:
        raise UsageProblem(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageProblem(f"{path} is not valid TOML ({exc}); fix or remove it.") from None
    found: dict[str, Context] = {}
    for name, entry in (doc.get("contexts") or {}).items():
        if not isinstance(entry, dict) or not isinstance(entry.get("namesrv"), str):
            raise UsageProblem(f"{path}: context '{name}' needs a namesrv = \"host:port\" "
                               "line; fix it or run `mqadmin context remove " f"{name}`.")
        found[name] = Context(name, entry["namesrv"], str(entry.get("description", "")))
    current = doc.get("current-context")
    return Contexts(current if isinstance(current, str) else None, found)


def _toml_string(value: str) -> str:
    # A JSON string without ASCII escaping is a valid TOML basic string.
    return json.dumps(value, ensure_ascii=False)


def save(contexts: Contexts) -> Path:
    """Write config.toml (creating the directory); returns its path."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# mqadmin contexts: edit by hand or with `mqadmin context`.", ""]
    if contexts.current is not None:
        lines += [f"current-context = {_toml_string(contexts.current)}", ""]
    for name in sorted(contexts.contexts):
        ctx = contexts.contexts[name]
        lines.append(f"[contexts.{_toml_string(name)}]")
        lines.append(f"namesrv = {_toml_string(ctx.namesrv)}")
        if ctx.description:
            lines.append(f"description = {_toml_string(ctx.description)}")
        lines.append("")
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines), encoding="utf-8")
    tmp.replace(path)
    return path


def check_addrs(value: str) -> list[str]:
    """The ``host:port`` list in `value`.

    Raises:
        UsageProblem: an entry is not host:port, or there is none.
    """
    try:
        addrs = parse_addr_list(value)
    except ValueError as exc:
        raise UsageProblem(
            f"bad name server address list {value!r}: {exc}. Pass -n host:port "
            "(several separated by ';').") from None
    if not addrs:
        raise UsageProblem(f"no name server address in {value!r}: pass -n host:port.")
    return addrs


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a command goes: the name servers and the context they came from (if any)."""

    addrs: list[str]
    context: str | None = None
    #: Signs every request (access control); from the context or MQADMIN_ACCESS/SECRET_KEY.
    credentials: Credentials | None = field(default=None, repr=False, compare=False)

    @property
    def text(self) -> str:
        return ";".join(self.addrs)

    @property
    def cluster_key(self) -> str:
        """The lag monitor's name for the cluster: the context name, else the name servers."""
        return self.context or self.text

    @property
    def lag_keys(self) -> list[str]:
        """The names the lag monitor may have kept this cluster's samples under, best first."""
        return list(dict.fromkeys([self.cluster_key, self.text]))

    @property
    def ledger_scope(self) -> str:
        """The dead-letter ledger's name for the cluster: its name servers, sorted."""
        return ";".join(sorted(self.addrs))


def resolve(namesrv: str | None, context: str | None) -> Endpoint:
    """The name servers from ``-n``, ``--context``, NAMESRV_ADDR or the current context,
    with the credentials of MQADMIN_ACCESS_KEY/MQADMIN_SECRET_KEY or of the context.

    Raises:
        UsageProblem: none of them is set, an address is malformed, or the credentials file
            is readable by others.
        TargetNotFound: ``--context`` names no saved context.
    """
    found = _resolve(namesrv, context)
    return Endpoint(found.addrs, found.context, credentials.for_context(found.context))


def resolve_many(namesrv: str | None, contexts: Sequence[str],
                 all_contexts: bool) -> list[Endpoint]:
    """The clusters of a command that reads several: every saved context with
    `all_contexts`, else each of `contexts`, else the one `resolve` finds.

    Raises:
        UsageProblem: `all_contexts` with no context saved, or with ``-n`` or ``--context``.
        TargetNotFound: a context is not saved.
    """
    if all_contexts:
        if namesrv or contexts:
            raise UsageProblem("--all-contexts reads every saved context: leave out -n and "
                               "--context, or name the contexts with --context (repeated).")
        names = sorted(load().contexts)
        if not names:
            raise UsageProblem("no context saved: add them with `mqadmin context add NAME -n "
                               "host:port`, or pass --context NAME for each cluster.")
        return [resolve(None, name) for name in names]
    if namesrv or len(contexts) < 2:
        return [resolve(namesrv, contexts[0] if contexts else None)]
    return [resolve(None, name) for name in dict.fromkeys(contexts)]


def _resolve(namesrv: str | None, context: str | None) -> Endpoint:
    if namesrv is not None and namesrv.strip():
        return Endpoint(check_addrs(namesrv))
    if context:
        saved = load()
        found = saved.contexts.get(context)
        if found is None:
            known = ", ".join(sorted(saved.contexts)) or "none saved"
            raise TargetNotFound(f"no context named '{context}' (known: {known}). Add it with "
                                 f"`mqadmin context add {context} -n host:port`.")
        return Endpoint(check_addrs(found.namesrv), context)
    env = os.environ.get(NAMESRV_ENV)
    if env and env.strip():
        return Endpoint(check_addrs(env))
    saved = load()
    if saved.current and saved.current in saved.contexts:
        return Endpoint(check_addrs(saved.contexts[saved.current].namesrv), saved.current)
    raise UsageProblem(
        f"no name server address: pass -n host:port, set {NAMESRV_ENV} "
        f"(e.g. export {NAMESRV_ENV}=127.0.0.1:9876) or choose a context with "
        "`mqadmin context use NAME`.")

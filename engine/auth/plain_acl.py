"""4.9's ACL 1.0 files (plain_acl.yml): where they are, reading, converting to users and rules.

Where (4.9.7 `PlainPermissionManager`): ``$ROCKETMQ_HOME/conf/plain_acl.yml`` and every
``*.yml``/``*.yaml`` under ``$ROCKETMQ_HOME/conf/acl/`` (recursively).  An AccessKey defined
in two files counts once (the first file read).  Accounts: accessKey, secretKey (both longer
than 6 characters), whiteRemoteAddress, admin, defaultTopicPerm, defaultGroupPerm (absent =
DENY), topicPerms/groupPerms as ``name=PERM``.  A PERM is PUB, SUB, PUB|SUB, SUB|PUB or
DENY exactly (trimmed, case-sensitive); anything else reads as DENY, as 4.9.7's
`Permission.parsePermFromString` does (its admin code 50 refuses it: `check_named_perms`).
A name given twice keeps its last perm.

Conversion (as 5.3's `AuthMigrator`, made decision-exact): admin -> SUPER, else NORMAL; each
named perm -> a CUSTOM entry (DENY -> Deny All); defaults -> DEFAULT entries on ``Topic:*`` /
``Group:*``.  4.9 never falls back to the default for a named resource, while 2.0 does when
the named entry lacks the action; so a named perm leaving out Pub or Sub also gets a
DEFAULT-policy Deny for the missing action on that exact name.  An admin account that also
names perms keeps them (NORMAL + all on the cluster, create/delete on topics and groups),
as 4.9 checked an admin's perms when it had any.  4.9.7 lets every signed account send to
RMQ_SYS_TRACE_TOPIC (`validate` skips the perm check for it), so each NORMAL account gets a
CUSTOM Allow Pub there (its read still follows its perms).  White addresses keep 1.0's
meaning (`AuthTables`).
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from typing import Any

import yaml

from engine.auth.addresses import AddressMatcher, compile_white
from engine.auth.errors import AuthFileError, AuthInputError
from engine.auth.model import (
    Acl,
    Action,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
    User,
    UserType,
)
from engine.protocol.body.auth import PlainAccessConfig

MIN_KEY_LENGTH = 6  # 4.9.7 AclConstants: keys must be longer than this
PERMS = {"PUB": ("PUB",), "SUB": ("SUB",), "PUB|SUB": ("PUB", "SUB"), "SUB|PUB": ("PUB", "SUB"),
         "DENY": ()}
#: What an admin account that also names perms keeps: 4.9's admin codes (topic and group
#: create/delete, broker config, cluster-wide reads), but no action data requests accept.
ADMIN_ENTRIES = (
    PolicyEntry(Resource(ResourceType.CLUSTER, None, ResourcePattern.ANY), (Action.ALL,)),
    PolicyEntry(Resource(ResourceType.TOPIC, None, ResourcePattern.ANY),
                (Action.CREATE, Action.DELETE)),
    PolicyEntry(Resource(ResourceType.GROUP, None, ResourcePattern.ANY),
                (Action.CREATE, Action.DELETE)),
)
#: 4.9.7 `PlainPermissionManager.validate` lets any signed account send to the trace topic
#: (the check of its perms is skipped when the request needs only PUB on it).
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TRACE_ENTRY = PolicyEntry(Resource(ResourceType.TOPIC, TRACE_TOPIC, ResourcePattern.LITERAL),
                          (Action.PUB,))


def default_file(home: str) -> str:
    return os.path.join(home, "conf", "plain_acl.yml")


def find_files(home: str) -> list[str]:
    """The ACL files 4.9.7 reads under ROCKETMQ_HOME, the conf/acl ones first."""
    acl_dir = os.path.join(home, "conf", "acl")
    found = sorted(p for pat in ("**/*.yml", "**/*.yaml")
                   for p in glob.glob(os.path.join(acl_dir, pat), recursive=True))
    main = default_file(home)
    if os.path.isfile(main) and main not in found:
        found.append(main)
    return found


def read_yaml(path: str) -> dict[str, Any]:
    """One ACL file's mapping ({} when empty).

    Raises:
        AuthFileError: unreadable, not YAML, or not a mapping.
    """
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except OSError as exc:
        raise AuthFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise AuthFileError(f"{path} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AuthFileError(
            f"{path}: expected a mapping with accounts, found {type(data).__name__}")
    return data


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def account_from_yaml(item: Any, path: str) -> PlainAccessConfig:
    if not isinstance(item, dict):
        raise AuthFileError(f"{path}: an account is not a mapping: {item!r}")

    def perms(key: str) -> list[str] | None:
        value = item.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise AuthFileError(f"{path}: {key} of {item.get('accessKey')!r} is not a list")
        return [str(v) for v in value]
    admin = item.get("admin", False)
    return PlainAccessConfig(
        access_key=_text(item.get("accessKey")), secret_key=_text(item.get("secretKey")),
        white_remote_address=_text(item.get("whiteRemoteAddress")),
        admin=admin is True or str(admin).lower() == "true",
        default_topic_perm=_text(item.get("defaultTopicPerm")),
        default_group_perm=_text(item.get("defaultGroupPerm")),
        topic_perms=perms("topicPerms"), group_perms=perms("groupPerms"))


def _perm(text: str | None) -> tuple[str, ...]:
    """4.9.7 `Permission.parsePermFromString`: the trimmed text, case and all; else DENY."""
    if text is None:
        return ()
    return PERMS.get(text.strip(), ())


def _split(text: str, who: str) -> tuple[str, str]:
    """``name=PERM`` as 4.9.7 splits it (`StringUtils.split`: empty pieces dropped)."""
    parts = [p for p in text.split("=") if p]
    if len(parts) != 2 or not parts[0].strip():
        raise AuthInputError(f"{who}: {text!r} is not of the form name=PERM")
    return parts[0].strip(), parts[1]


def check_named_perms(perms: list[str] | None, who: str) -> None:
    """4.9.7 `Permission.checkResourcePerms` (admin code 50 only; a file is read leniently).

    Raises:
        AuthInputError: not ``name=PERM``, or PERM is not PUB, SUB, PUB|SUB, SUB|PUB or DENY.
    """
    for text in perms or []:
        _, perm = _split(text, who)
        if perm.strip() not in PERMS:
            raise AuthInputError(f"{who}: permission {perm!r} of {text!r} is not PUB, SUB, "
                                 "PUB|SUB, SUB|PUB or DENY")


def _named(perms: list[str] | None, who: str) -> dict[str, tuple[str, ...]]:
    """Name -> perm; a name given twice keeps its last perm (4.9.7 `addResourceAndPerm`)."""
    named: dict[str, tuple[str, ...]] = {}
    for text in perms or []:
        name, perm = _split(text, who)
        named[name] = _perm(perm)
    return named


def _named_entries(named: dict[str, tuple[str, ...]], rtype: ResourceType
                   ) -> tuple[list[PolicyEntry], list[PolicyEntry]]:
    custom: list[PolicyEntry] = []
    fallback_denies: list[PolicyEntry] = []
    for name, held in named.items():
        res = Resource(rtype, name, ResourcePattern.LITERAL)
        if not held:
            custom.append(PolicyEntry(res, (Action.ALL,), Decision.DENY))
            continue
        custom.append(PolicyEntry(res, tuple(Action[h] for h in held), Decision.ALLOW))
        missing = tuple(Action[a] for a in ("PUB", "SUB") if a not in held)
        if missing:
            fallback_denies.append(PolicyEntry(res, missing, Decision.DENY))
    return custom, fallback_denies


def _default_entry(text: str | None, rtype: ResourceType) -> PolicyEntry:
    held = _perm(text)
    res = Resource(rtype, None, ResourcePattern.ANY)
    if not held:
        return PolicyEntry(res, (Action.ALL,), Decision.DENY)
    return PolicyEntry(res, tuple(Action[h] for h in held), Decision.ALLOW)


def convert(account: PlainAccessConfig) -> tuple[User, Acl | None]:
    """One 4.9 account as a user and its rules.

    Raises:
        AuthInputError: keys too short, a perm not of the form name=PERM, a bad address.
    """
    key, secret = account.access_key or "", account.secret_key or ""
    if len(key) <= MIN_KEY_LENGTH or len(secret) <= MIN_KEY_LENGTH:
        raise AuthInputError(f"account {key!r}: accessKey and secretKey must be longer than "
                             f"{MIN_KEY_LENGTH} characters")
    compile_white(account.white_remote_address)  # refuse bad patterns now
    who = f"account {key!r}"
    topics = _named(account.topic_perms, who)
    groups = _named(account.group_perms, who)
    if account.admin and not (topics or groups):
        return User(key, secret, UserType.SUPER,
                    white_remote_address=account.white_remote_address), None
    if TRACE_TOPIC in topics:  # sending trace data passes, reading it follows the perm
        topics[TRACE_TOPIC] = ("PUB", *[p for p in topics[TRACE_TOPIC] if p == "SUB"])
    t_custom, t_deny = _named_entries(topics, ResourceType.TOPIC)
    g_custom, g_deny = _named_entries(groups, ResourceType.GROUP)
    if TRACE_TOPIC not in topics:
        t_custom.append(TRACE_ENTRY)
    custom = t_custom + g_custom
    if account.admin:
        custom += ADMIN_ENTRIES
    defaults = t_deny + g_deny + [_default_entry(account.default_topic_perm, ResourceType.TOPIC),
                                  _default_entry(account.default_group_perm, ResourceType.GROUP)]
    policies = [Policy(PolicyType.DEFAULT, tuple(defaults))]
    if custom:
        policies.insert(0, Policy(PolicyType.CUSTOM, tuple(custom)))
    user = User(key, secret, UserType.NORMAL, white_remote_address=account.white_remote_address)
    return user, Acl(user.subject, tuple(policies))


@dataclass(frozen=True, slots=True)
class PlainAclSnapshot:
    """What the 1.0 files say, converted; `accounts` keeps the file form for GET answers."""

    files: tuple[str, ...] = ()
    accounts: dict[str, tuple[str, PlainAccessConfig]] = field(default_factory=dict)
    users: dict[str, User] = field(default_factory=dict)
    acls: dict[str, Acl] = field(default_factory=dict)
    global_white_addrs: tuple[str, ...] = ()
    global_whites: tuple[AddressMatcher, ...] = ()
    user_whites: dict[str, AddressMatcher] = field(default_factory=dict)
    versions: dict[str, dict[str, int]] = field(default_factory=dict)


def load_snapshot(home: str) -> PlainAclSnapshot:
    """Read and convert every 1.0 file under `home`.

    Raises:
        AuthFileError: a file cannot be read, parsed or converted (the message names it).
    """
    files = find_files(home)
    accounts: dict[str, tuple[str, PlainAccessConfig]] = {}
    users: dict[str, User] = {}
    acls: dict[str, Acl] = {}
    whites: list[str] = []
    versions: dict[str, dict[str, int]] = {}
    for path in files:
        data = read_yaml(path)
        for addr in data.get("globalWhiteRemoteAddresses") or []:
            whites.append(str(addr))
        for item in data.get("accounts") or []:
            account = account_from_yaml(item, path)
            if account.access_key in accounts:
                continue  # 4.9: an AccessKey counts in the first file only
            try:
                user, acl = convert(account)
            except AuthInputError as exc:
                raise AuthFileError(f"{path}: {exc}") from None
            accounts[user.username] = (path, account)
            users[user.username] = user
            if acl is not None:
                acls[user.username] = acl
        versions[path] = _version(data)
    try:
        matchers = tuple(compile_white(w) for w in whites)
        user_whites = {n: compile_white(u.white_remote_address) for n, u in users.items()
                       if u.white_remote_address}
    except AuthInputError as exc:
        raise AuthFileError(str(exc)) from None
    return PlainAclSnapshot(tuple(files), accounts, users, acls, tuple(whites), matchers,
                            user_whites, versions)


def _version(data: dict[str, Any]) -> dict[str, int]:
    items = data.get("dataVersion") or []
    first = items[0] if isinstance(items, list) and items and isinstance(items[0], dict) else {}
    try:
        return {"counter": int(first.get("counter", 0)),
                "timestamp": int(first.get("timestamp", 0))}
    except (TypeError, ValueError):
        return {"counter": 0, "timestamp": 0}

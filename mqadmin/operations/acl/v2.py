"""Users and ACL rules (5.3's ACL 2.0) on brokers: reads as rows, changes as `Mutation`s.

How this works: 5.3 keeps users and rules per broker (masters and slaves alike), so a command
given ``-c cluster`` reads or changes every broker of it and ``-b addr`` one broker, as
Apache's auth commands do.  Rows never hold a password.  The CLI (commands/acl.py) and the
dashboard call these functions and nothing else; they never print.

Stable signatures (the dashboard relies on them):

    user_rows(admin, *, broker_addr=None, cluster=None, contains=None) -> Gathered
    acl_rows(admin, *, broker_addr=None, cluster=None, subject=None, resource=None) -> Gathered
    create_user / update_user / delete_user / put_acl / delete_acl -> Mutation
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from engine.client.admin import MQAdmin
from engine.protocol.body.auth import AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo
from mqadmin.exit_codes import UsageProblem
from mqadmin.operations.mutation import Gathered, Mutation, failures_of, outcome_of
from mqadmin.operations.targets import brokers_of

Row = dict[str, Any]

USER_COLUMNS = ("broker", "username", "userType", "userStatus")
ACL_COLUMNS = ("broker", "subject", "policyType", "resource", "actions", "sourceIps",
               "decision")
USER_TYPES = ("Super", "Normal")
USER_STATUSES = ("enable", "disable")
ACTIONS = ("All", "Pub", "Sub", "Create", "Update", "Delete", "Get", "List")
DECISIONS = ("Allow", "Deny")


def subject_of(name: str) -> str:
    """``alice`` or ``User:alice`` -> ``User:alice``."""
    return name if ":" in name else f"User:{name}"


def _pick(value: str | None, allowed: Sequence[str], what: str) -> str | None:
    if value is None or not value.strip():
        return None
    for choice in allowed:
        if choice.lower() == value.strip().lower():
            return choice
    raise UsageProblem(f"unknown {what} {value!r}: use one of {', '.join(allowed)}.")


def user_row(addr: str, user: UserInfo) -> Row:
    return {"broker": addr, "username": user.username or "", "userType": user.user_type or "",
            "userStatus": user.user_status or ""}


def acl_row_list(addr: str, acl: AclInfo) -> list[Row]:
    rows = []
    for policy in acl.policies or []:
        for entry in policy.entries or []:
            rows.append({"broker": addr, "subject": acl.subject or "",
                         "policyType": policy.policy_type or "Custom",
                         "resource": entry.resource or "",
                         "actions": ",".join(entry.actions or []),
                         "sourceIps": ",".join(entry.source_ips or []),
                         "decision": entry.decision or ""})
    return rows


async def _gather(admin: MQAdmin, broker_addr: str | None, cluster: str | None,
                  read: Callable[[str], Awaitable[list[Row]]]) -> Gathered:
    addrs = await brokers_of(admin, broker_addr, cluster, slaves=True)()
    outcomes = await asyncio.gather(*(outcome_of(a, read(a)) for a in addrs))
    rows = [row for o in outcomes if o.value is not None for row in o.value]
    return Gathered(rows, failures_of(outcomes), len(outcomes), noun="brokers")


async def user_rows(admin: MQAdmin, *, broker_addr: str | None = None,
                    cluster: str | None = None, contains: str | None = None) -> Gathered:
    """Users of each broker (name containing `contains`), without passwords."""
    async def read(addr: str) -> list[Row]:
        return [user_row(addr, u) for u in await admin.broker.list_users(addr, contains)]
    return await _gather(admin, broker_addr, cluster, read)


async def one_user_rows(admin: MQAdmin, username: str, *, broker_addr: str | None = None,
                        cluster: str | None = None) -> Gathered:
    async def read(addr: str) -> list[Row]:
        user = await admin.broker.get_user(addr, username)
        return [user_row(addr, user)] if user is not None else []
    return await _gather(admin, broker_addr, cluster, read)


async def acl_rows(admin: MQAdmin, *, broker_addr: str | None = None,
                   cluster: str | None = None, subject: str | None = None,
                   resource: str | None = None) -> Gathered:
    """One row per rule entry of each broker (filters match substrings, as 5.3's)."""
    async def read(addr: str) -> list[Row]:
        acls = await admin.broker.list_acls(addr, subject, resource)
        return [row for acl in acls for row in acl_row_list(addr, acl)]
    return await _gather(admin, broker_addr, cluster, read)


async def one_acl_rows(admin: MQAdmin, subject: str, *, broker_addr: str | None = None,
                       cluster: str | None = None) -> Gathered:
    async def read(addr: str) -> list[Row]:
        acl = await admin.broker.get_acl(addr, subject_of(subject))
        return acl_row_list(addr, acl) if acl is not None else []
    return await _gather(admin, broker_addr, cluster, read)


# ---------------------------------------------------------------------------- users


def show_user(user: UserInfo | None) -> str:
    if user is None:
        return "(absent)"
    return f"{user.user_type or 'Normal'}, {user.user_status or 'enable'}"


def create_user(admin: MQAdmin, username: str, password: str, user_type: str | None = None,
                *, broker_addr: str | None, cluster: str | None) -> Mutation[UserInfo | None]:
    """Create a user (Normal unless `user_type` says Super) on a broker or every broker of a
    cluster."""
    utype = _pick(user_type, USER_TYPES, "user type") or "Normal"
    if not password:
        raise UsageProblem("the password is empty: give --password or --password-file.")
    info = UserInfo(username, password, utype, "enable")

    async def change(addr: str) -> str:
        await admin.broker.create_user(addr, info)
        return "created"

    return Mutation("createUser", username, servers=brokers_of(admin, broker_addr, cluster,
                                                               slaves=True),
                    read=lambda a: admin.broker.get_user(a, username), show=show_user,
                    done=lambda _, s: s is not None and s.user_type == utype, apply=change,
                    after=f"{utype}, enable", role="broker")


def update_user(admin: MQAdmin, username: str, *, password: str | None = None,
                user_type: str | None = None, status: str | None = None,
                broker_addr: str | None, cluster: str | None) -> Mutation[UserInfo | None]:
    """Change a user's password, type or status (what is None stays)."""
    utype = _pick(user_type, USER_TYPES, "user type")
    ustatus = _pick(status, USER_STATUSES, "user status")
    if not (password or utype or ustatus):
        raise UsageProblem("nothing to change: give --password(-file), --userType or "
                           "--userStatus.")
    info = UserInfo(username, password or None, utype, ustatus)

    def promised(old: UserInfo | None) -> str:
        if old is None:
            return "(absent: refused)"
        pw = ", new password" if password else ""
        return f"{utype or old.user_type}, {ustatus or old.user_status}{pw}"

    def done(_: UserInfo | None, new: UserInfo | None) -> bool:
        return new is not None and (utype is None or new.user_type == utype) and (
            ustatus is None or new.user_status == ustatus)

    async def change(addr: str) -> str:
        await admin.broker.update_user(addr, info)
        return "updated"

    return Mutation("updateUser", username, servers=brokers_of(admin, broker_addr, cluster,
                                                               slaves=True),
                    read=lambda a: admin.broker.get_user(a, username), show=show_user,
                    done=done, apply=change, after=promised, role="broker")


def delete_user(admin: MQAdmin, username: str, *, broker_addr: str | None,
                cluster: str | None) -> Mutation[UserInfo | None]:
    """Delete a user and its rules."""
    async def change(addr: str) -> str:
        await admin.broker.delete_user(addr, username)
        return "deleted"

    return Mutation("deleteUser", username, servers=brokers_of(admin, broker_addr, cluster,
                                                               slaves=True),
                    read=lambda a: admin.broker.get_user(a, username), show=show_user,
                    done=lambda _, s: s is None, apply=change, after="(absent)",
                    role="broker")


# ---------------------------------------------------------------------------- rules


def show_acl(acl: AclInfo | None, resources: Sequence[str] | None = None) -> str:
    if acl is None:
        return "(no rules)"
    parts = [f"{e.resource} {','.join(e.actions or [])} {e.decision}"
             for p in acl.policies or [] for e in p.entries or []
             if resources is None or e.resource in resources]
    return "; ".join(parts) or "(no rule on these resources)"


def acl_info(subject: str, resources: Sequence[str], actions: Sequence[str],
             source_ips: Sequence[str], decision: str) -> AclInfo:
    """5.3's `AclInfo.of`: one CUSTOM policy, one entry per resource."""
    if not resources:
        raise UsageProblem("no resource: give -r Topic:name,Group:name (or Topic:*, Topic:p*).")
    acts = [_pick(a, ACTIONS, "action") or "" for a in actions]
    if not acts:
        raise UsageProblem(f"no action: give -a with some of {', '.join(ACTIONS)}.")
    dec = _pick(decision, DECISIONS, "decision") or "Allow"
    entries = [PolicyEntryInfo(r.strip(), acts, list(source_ips) or None, dec)
               for r in resources]
    return AclInfo(subject_of(subject), [PolicyInfo(None, entries)])


def put_acl(admin: MQAdmin, acl: AclInfo, *, update: bool, broker_addr: str | None,
            cluster: str | None) -> Mutation[AclInfo | None]:
    """createAcl / updateAcl: merge the entries into the subject's rules."""
    subject = acl.subject or ""
    entries = [e for p in acl.policies or [] for e in p.entries or []]
    resources = [e.resource or "" for e in entries]
    wanted = {(e.resource, tuple(e.actions or []), e.decision) for e in entries}

    def done(_: AclInfo | None, new: AclInfo | None) -> bool:
        have = {(e.resource, tuple(e.actions or []), e.decision)
                for p in (new.policies or [] if new else []) for e in p.entries or []}
        return wanted <= have

    async def change(addr: str) -> str:
        await (admin.broker.update_acl if update else admin.broker.create_acl)(addr, acl)
        return "updated" if update else "created"

    return Mutation("updateAcl" if update else "createAcl", subject,
                    servers=brokers_of(admin, broker_addr, cluster, slaves=True),
                    read=lambda a: admin.broker.get_acl(a, subject),
                    show=lambda s: show_acl(s, resources), done=done, apply=change,
                    after=show_acl(acl), role="broker")


def delete_acl(admin: MQAdmin, subject: str, resource: str | None = None, *,
               broker_addr: str | None, cluster: str | None) -> Mutation[AclInfo | None]:
    """Delete the rule on `resource`, or every rule of the subject."""
    subj = subject_of(subject)

    def done(_: AclInfo | None, new: AclInfo | None) -> bool:
        if resource is None or new is None:
            return new is None
        return all(e.resource != resource for p in new.policies or [] for e in p.entries or [])

    async def change(addr: str) -> str:
        await admin.broker.delete_acl(addr, subj, resource)
        return "deleted"

    return Mutation("deleteAcl", subj + (f" {resource}" if resource else ""),
                    servers=brokers_of(admin, broker_addr, cluster, slaves=True),
                    read=lambda a: admin.broker.get_acl(a, subj),
                    show=lambda s: show_acl(s, [resource] if resource else None),
                    done=done, apply=change,
                    after="(no rule on it)" if resource else "(no rules)", role="broker")

"""Authorization decisions of ACL 2.0: which rule entry applies to a request, ALLOW or DENY.

How this works (5.3 `DefaultAuthorizationProvider`: `UserAuthorizationHandler`, then
`AclAuthorizationHandler` for each resource the request needs): a SUPER user is allowed
everything, whatever its rules say.  For a NORMAL user, entries of the CUSTOM policy that cover
the resource, share an action with the request and accept its source IP are candidates; when
there are none, the DEFAULT policy's are.  The most specific candidate wins: a literal name
before a prefix, a longer prefix before a shorter one, a typed wildcard (``Topic:*``) before
``*``, and on a tie DENY before ALLOW.  No rules, or no candidate, means no permission.

That order is what 5.3's `comparePolicyEntries` says it does; its code up to 5.3.3 does not:
a literal and a prefix each rank first when compared first (each pair of branches sets 1,
then -1), the shorter prefix ranks first, and ALLOW before DENY on a tie.  Apache fixed the
first two after 5.3.3 (apache/rocketmq#9539) and the third later (#9784); this is the fixed
order.  `tests/auth/test_rules.py` checks it case by case.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.auth.model import (
    Acl,
    Action,
    Decision,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
    User,
    UserType,
)
from engine.auth.needs import Need

_PATTERN_RANK = {ResourcePattern.LITERAL: 0, ResourcePattern.PREFIXED: 1, ResourcePattern.ANY: 2}


def _specificity(entry: PolicyEntry) -> tuple[int, int, int, int]:
    r = entry.resource
    return (1 if r.type is ResourceType.ANY else 0, _PATTERN_RANK[r.pattern],
            -len(r.name or ""), 0 if entry.decision is Decision.DENY else 1)


def _shares_action(entry: PolicyEntry, actions: tuple[Action, ...]) -> bool:
    """5.3 `PolicyEntry.isMatchAction`: Any matches every entry, All every action."""
    if Action.ANY in actions:
        return True
    held = entry.actions
    return Action.ALL in held or any(a in held for a in actions)


def decide(acl: Acl | None, resource: Resource, actions: tuple[Action, ...],
           ip: str) -> str | None:
    """A NORMAL user's rules on one resource: None when allowed, else why not (no secret)."""
    wanted = "|".join(a.value for a in actions)
    if acl is None:
        return f"no rule allows {wanted} on {resource.key}"
    address_refused = False
    for ptype in (PolicyType.CUSTOM, PolicyType.DEFAULT):
        policy = acl.policy(ptype)
        if policy is None:
            continue
        matched = [e for e in policy.entries
                   if e.resource.matches(resource) and _shares_action(e, actions)]
        candidates = [e for e in matched if e.allows_source(ip)]
        if candidates:
            best = min(candidates, key=_specificity)
            if best.decision is Decision.DENY:
                return f"{wanted} on {resource.key} is denied by the rule on {best.resource.key}"
            return None
        address_refused = address_refused or bool(matched)
    if address_refused:
        return f"address {ip} is not allowed to {wanted} on {resource.key}"
    return f"no rule allows {wanted} on {resource.key}"


def authorize(user: User, acl: Acl | None, needs: Iterable[Need], ip: str) -> str | None:
    """A whole request: None when every need is allowed, else why the first refused one is not.

    Needs nothing (a request 5.3 leaves to authentication alone): allowed.
    """
    if user.user_type is UserType.SUPER:
        return None
    for resource, actions in needs:
        why = decide(acl, resource, actions, ip)
        if why is not None:
            return why
    return None

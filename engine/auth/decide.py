"""Authorization decisions of ACL 2.0: which rule entry applies to a request, ALLOW or DENY.

How this works (5.3 `AclAuthorizationHandler`): entries of the CUSTOM policy that cover the
resource, share an action with the request and accept its source IP are candidates; when there
are none, the DEFAULT policy's are.  The most specific candidate wins: a literal name before a
prefix, a longer prefix before a shorter one, a typed wildcard (``Topic:*``) before ``*``, and
on a tie DENY before ALLOW (5.3's comparator means this but swaps two branches; this is the
order its comments describe).  No candidate means no permission.
"""

from __future__ import annotations

from engine.auth.model import (
    Acl,
    Action,
    Decision,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
)

_PATTERN_RANK = {ResourcePattern.LITERAL: 0, ResourcePattern.PREFIXED: 1, ResourcePattern.ANY: 2}


def _specificity(entry: PolicyEntry) -> tuple[int, int, int, int]:
    r = entry.resource
    return (1 if r.type is ResourceType.ANY else 0, _PATTERN_RANK[r.pattern],
            -len(r.name or ""), 0 if entry.decision is Decision.DENY else 1)


def _shares_action(entry: PolicyEntry, actions: tuple[Action, ...]) -> bool:
    if Action.ANY in actions:
        return True
    held = entry.actions
    return Action.ALL in held or any(a in held for a in actions)


def decide(acl: Acl | None, resource: Resource, actions: tuple[Action, ...],
           ip: str) -> str | None:
    """None when allowed, else why not (without any secret)."""
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

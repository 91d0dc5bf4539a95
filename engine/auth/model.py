"""Users, resources and ACL rules (5.3's ACL 2.0 model) and their wire forms (UserInfo/AclInfo).

Names follow 5.3 (`auth/.../model`, `common/action/Action`, `common/resource/*`): a user is a
username/password (= AccessKey/SecretKey) of type SUPER or NORMAL, ENABLE or DISABLE.  A rule
set (`Acl`) belongs to a subject ``User:<name>`` and holds a CUSTOM and a DEFAULT policy; each
entry names one resource (``Topic:orders``, ``Group:billing*``, ``Cluster:*``, ``*``), actions,
optional source IPs (IP or CIDR) and ALLOW or DENY.  Names are matched case-insensitively on
input and written in Apache's spelling.  A policy holds at most one entry per resource (an
update replaces it), as 5.3's `Policy.updateEntry` does.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TypeVar

from engine.auth.errors import AuthInputError
from engine.protocol.body.auth import AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo

E = TypeVar("E", bound="_Named")


class _Named(Enum):
    @classmethod
    def parse(cls: type[E], text: str | None, what: str) -> E:
        wanted = (text or "").strip().lower()
        for member in cls:
            if member.value.lower() == wanted or member.name.lower() == wanted:
                return member
        names = ", ".join(m.value for m in cls)
        raise AuthInputError(f"unknown {what} {text!r}: expected one of {names}")


class UserType(_Named):
    SUPER = "Super"
    NORMAL = "Normal"


class UserStatus(_Named):
    ENABLE = "enable"
    DISABLE = "disable"


class Action(_Named):
    ALL = "All"
    ANY = "Any"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"


class ResourceType(_Named):
    ANY = "Any"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"
    TOPIC = "Topic"
    GROUP = "Group"


class ResourcePattern(_Named):
    ANY = "ANY"
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Decision(_Named):
    ALLOW = "Allow"
    DENY = "Deny"


class PolicyType(_Named):
    CUSTOM = "Custom"
    DEFAULT = "Default"


@dataclass(frozen=True, slots=True)
class User:
    username: str
    password: str = field(repr=False)
    user_type: UserType = UserType.NORMAL
    status: UserStatus = UserStatus.ENABLE
    #: ACL 1.0 only: from these addresses the account needs no signature and no rule.
    white_remote_address: str | None = None

    @property
    def subject(self) -> str:
        return f"User:{self.username}"


@dataclass(frozen=True, slots=True)
class Resource:
    type: ResourceType
    name: str | None = None
    pattern: ResourcePattern = ResourcePattern.LITERAL

    @classmethod
    def parse(cls, key: str | None) -> Resource:
        """``*``, ``Topic:*``, ``Topic:abc*`` (prefixed) or ``Group:abc`` (literal)."""
        text = (key or "").strip()
        if not text:
            raise AuthInputError("a resource is empty: expected e.g. Topic:orders or Group:g*")
        if text == "*":
            return cls(ResourceType.ANY, None, ResourcePattern.ANY)
        kind, sep, name = text.partition(":")
        rtype = ResourceType.parse(kind, "resource type")
        if not sep or not name:
            raise AuthInputError(f"resource {text!r} has no name: expected {kind}:name")
        if name == "*":
            return cls(rtype, None, ResourcePattern.ANY)
        if name.endswith("*"):
            return cls(rtype, name[:-1], ResourcePattern.PREFIXED)
        return cls(rtype, name, ResourcePattern.LITERAL)

    @property
    def key(self) -> str:
        if self.type is ResourceType.ANY:
            return "*"
        if self.pattern is ResourcePattern.ANY:
            return f"{self.type.value}:*"
        if self.pattern is ResourcePattern.PREFIXED:
            return f"{self.type.value}:{self.name}*"
        return f"{self.type.value}:{self.name}"

    def matches(self, wanted: Resource) -> bool:
        """Whether this (rule) resource covers the literal resource a request names."""
        if self.type is ResourceType.ANY:
            return True
        if self.type is not wanted.type:
            return False
        if self.pattern is ResourcePattern.ANY:
            return True
        if self.pattern is ResourcePattern.PREFIXED:
            return (wanted.name or "").startswith(self.name or "")
        return wanted.name == self.name


SourceNet = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_source_ip(text: str) -> SourceNet:
    try:
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise AuthInputError(f"source IP {text!r} is neither an IP address nor a CIDR") from None


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    resource: Resource
    actions: tuple[Action, ...]
    decision: Decision = Decision.ALLOW
    source_ips: tuple[str, ...] = ()
    nets: tuple[SourceNet, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.actions:
            raise AuthInputError(f"the rule on {self.resource.key} has no action")
        if Action.ANY in self.actions:
            raise AuthInputError("the action Any is only for checks, not for rules")
        if self.source_ips and not self.nets:
            object.__setattr__(self, "nets", tuple(parse_source_ip(s) for s in self.source_ips))

    def allows_source(self, ip: str) -> bool:
        if not self.nets:
            return True
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError:
            return False
        return any(addr in net for net in self.nets)


@dataclass(frozen=True, slots=True)
class Policy:
    type: PolicyType
    entries: tuple[PolicyEntry, ...]

    def updated(self, new: tuple[PolicyEntry, ...]) -> Policy:
        """Entries of `new` replace those on the same resource; others are appended."""
        by_resource = {e.resource: e for e in self.entries}
        order = [e.resource for e in self.entries]
        for entry in new:
            if entry.resource not in by_resource:
                order.append(entry.resource)
            by_resource[entry.resource] = entry
        return Policy(self.type, tuple(by_resource[r] for r in order))


@dataclass(frozen=True, slots=True)
class Acl:
    subject: str
    policies: tuple[Policy, ...]

    def policy(self, ptype: PolicyType) -> Policy | None:
        for p in self.policies:
            if p.type is ptype:
                return p
        return None

    def updated(self, new: Acl) -> Acl:
        """5.3 `Acl.updatePolicy`: merge `new`'s policies entry by entry into these."""
        policies = list(self.policies)
        for np in new.policies:
            old = self.policy(np.type)
            if old is None:
                policies.append(np)
            else:
                policies[policies.index(old)] = old.updated(np.entries)
        return replace(self, policies=tuple(policies))

    def without(self, ptype: PolicyType, resource: Resource) -> Acl:
        """5.3 `Acl.deletePolicy`: drop the entry on `resource`, and the policy when emptied."""
        policies = []
        for p in self.policies:
            if p.type is ptype:
                p = Policy(p.type, tuple(e for e in p.entries if e.resource != resource))
                if not p.entries:
                    continue
            policies.append(p)
        return replace(self, policies=tuple(policies))


def subject_name(subject: str | None) -> str:
    """``User:alice`` -> ``alice`` (the only subject type of 5.3)."""
    text = (subject or "").strip()
    kind, sep, name = text.partition(":")
    if not sep or kind.lower() != "user" or not name:
        raise AuthInputError(f"subject {subject!r} is not of the form User:<username>")
    return name


# ---------------------------------------------------------------------------- wire forms


def user_to_info(user: User) -> UserInfo:
    return UserInfo(user.username, user.password, user.user_type.value, user.status.value)


def user_from_info(info: UserInfo, *, username: str | None = None) -> User:
    """A user from its body; type NORMAL and status ENABLE when absent (5.3 createUser)."""
    name = (username or info.username or "").strip()
    if not name:
        raise AuthInputError("the username is blank")
    utype = UserType.parse(info.user_type, "user type") if info.user_type else UserType.NORMAL
    status = (UserStatus.parse(info.user_status, "user status") if info.user_status
              else UserStatus.ENABLE)
    return User(name, info.password or "", utype, status)


def entry_from_info(info: PolicyEntryInfo) -> PolicyEntry:
    actions = []
    for text in info.actions or []:
        action = Action.parse(text, "action")
        actions.append(action)
    decision = Decision.parse(info.decision, "decision")
    ips = tuple(s.strip() for s in info.source_ips or [] if s.strip())
    return PolicyEntry(Resource.parse(info.resource), tuple(actions), decision, ips)


def acl_from_info(info: AclInfo, *, subject: str | None = None) -> Acl:
    """Rules from their body; a policy without type is CUSTOM (5.3 `initAcl`)."""
    subj = info.subject or subject
    name = subject_name(subj)
    policies = []
    for pinfo in info.policies or []:
        ptype = (PolicyType.parse(pinfo.policy_type, "policy type") if pinfo.policy_type
                 else PolicyType.CUSTOM)
        entries = tuple(entry_from_info(e) for e in pinfo.entries or [])
        if not entries:
            raise AuthInputError("a policy has no entries")
        policies.append(Policy(ptype, Policy(ptype, ()).updated(entries).entries))
    if not policies:
        raise AuthInputError("the rules name no policy")
    return Acl(f"User:{name}", tuple(policies))


def acl_to_info(acl: Acl) -> AclInfo:
    return AclInfo(acl.subject, [
        PolicyInfo(p.type.value, [
            PolicyEntryInfo(e.resource.key, [a.value for a in e.actions],
                            list(e.source_ips) or None, e.decision.value)
            for e in p.entries])
        for p in acl.policies])

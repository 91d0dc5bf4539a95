"""Access control's rules as a table of cases, each checked against Apache's stated rule.

`RULES` runs ACL 2.0 cases through `decide.authorize` (the user and rules of one subject, what
a request needs, its source IP); each case names the 5.3 rule it checks: a class and method
of `apache/rocketmq` at rocketmq-all-5.3.3 (`auth` module: `UserAuthorizationHandler`,
`AclAuthorizationHandler`, `PolicyEntry`, `Resource`, `Environment`, `Policy`,
`AuthorizationEvaluator`), one of the cases of its `AuthorizationEvaluatorTest`, or an
Apache issue where 5.3.3's code and its stated rule differ (then the stated rule is checked).

`V1` runs plain_acl.yml accounts (4.9's ACL 1.0) through the broker's real path (files read
by `AuthStore`, converted, installed in an `AccessGuard`, signed requests checked) and
expects what 4.9.7's `PlainPermissionManager.validate` / `checkPerm` and `Permission` decide:
the mapping onto the 2.0 model (5.3 `AuthMigrator`, made decision-exact) must not change
any decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.auth.decide import authorize
from engine.auth.errors import AuthInputError
from engine.auth.guard import AccessGuard
from engine.auth.model import (
    Acl,
    Action,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    User,
    UserType,
    subject_name,
)
from engine.auth.needs import broker_needs, needs_key
from engine.auth.plain_acl_write import update_account
from engine.auth.store import AuthStore
from engine.protocol.body.auth import PlainAccessConfig
from engine.protocol.codes import RequestCode as C
from engine.protocol.command import RemotingCommand, request
from engine.protocol.signature import Credentials, sign

# --------------------------------------------------------------------------- ACL 2.0


@dataclass(frozen=True)
class Case:
    name: str
    #: The Apache rule this case checks.
    apache: str
    #: "Policy Resource Actions Decision [sourceIps]", applied in order as 5.3's
    #: createAcl/updateAcl would (`Acl.updatePolicy`: an entry on the same resource replaces).
    rules: tuple[str, ...]
    #: What the request needs: "Actions Resource", actions being alternatives (Sub|Get).
    wants: tuple[str, ...]
    #: None: allowed; else a fragment of the refusal.
    expect: str | None
    ip: str = "192.168.0.1"
    user: UserType = UserType.NORMAL
    #: Keep the entries as listed (several on one resource), as a converted 1.0 file may.
    raw: bool = False


def _entry(text: str) -> tuple[PolicyType, PolicyEntry]:
    ptype, resource, actions, decision, *ips = text.split()
    return PolicyType.parse(ptype, "policy type"), PolicyEntry(
        Resource.parse(resource), tuple(Action.parse(a, "action") for a in actions.split(",")),
        Decision.parse(decision, "decision"), tuple(ips[0].split(",")) if ips else ())


def acl_of(case: Case) -> Acl | None:
    if not case.rules:
        return None
    entries = [_entry(r) for r in case.rules]
    if case.raw:
        return Acl("User:u", tuple(Policy(t, tuple(e for pt, e in entries if pt is t))
                                   for t in PolicyType if any(pt is t for pt, _ in entries)))
    acl = Acl("User:u", ())
    for ptype, entry in entries:
        acl = acl.updated(Acl("User:u", (Policy(ptype, (entry,)),)))
    return acl


def needs_of(case: Case) -> list[tuple[Resource, tuple[Action, ...]]]:
    out = []
    for text in case.wants:
        actions, resource = text.split()
        out.append((Resource.parse(resource),
                    tuple(Action.parse(a, "action") for a in actions.split("|"))))
    return out


EVALUATE5 = ("Custom * Pub,Sub Allow 192.168.0.0/24", "Custom Topic:* Pub,Sub Deny 192.168.0.0/24",
             "Custom Topic:test* Pub,Sub Allow 192.168.0.0/24",
             "Custom Topic:test-1 Pub,Sub Deny 192.168.0.0/24")
EVALUATE9 = ("Custom * Pub Allow", "Custom Topic:* Pub Allow", "Custom Topic:test* Pub Allow",
             "Custom Topic:test_* Pub Deny", "Custom Topic:test_001 Pub Deny")
RESOURCE = "Resource.isMatch"
ACTION = "PolicyEntry.isMatchAction"
ORDER = "AclAuthorizationHandler.comparePolicyEntries"
POLICIES = "AclAuthorizationHandler.matchPolicyEntries"
ENV = "PolicyEntry.isMatchEnvironment, Environment.isMatch, IPAddressUtils.isIPInRange"

RULES = [
    # resources: literal, prefixed, any
    Case("a literal name matches itself", RESOURCE + " LITERAL: StringUtils.equals",
         ("Custom Topic:orders Pub Allow",), ("Pub Topic:orders",), None),
    Case("a literal name is case-sensitive", RESOURCE + " LITERAL: StringUtils.equals",
         ("Custom Topic:Orders Pub Allow",), ("Pub Topic:orders",), "no rule allows"),
    Case("a literal name is not a prefix", RESOURCE + " LITERAL",
         ("Custom Topic:orders Pub Allow",), ("Pub Topic:orders-eu",), "no rule allows"),
    Case("a prefix matches the names it starts", RESOURCE + " PREFIXED: StringUtils.startsWith",
         ("Custom Topic:ord* Pub Allow",), ("Pub Topic:orders",), None),
    Case("a prefix matches its own stem", "AuthorizationEvaluatorTest.evaluate1",
         ("Custom Topic:test* Pub Allow 192.168.0.0/24",), ("Pub Topic:test",), None),
    Case("a prefix does not match other names", "AuthorizationEvaluatorTest.evaluate4",
         ("Custom Topic:test* Pub Allow 192.168.0.0/24",), ("Pub Topic:abc",), "no rule allows"),
    Case("Topic:* matches every topic", RESOURCE + " ANY pattern",
         ("Custom Topic:* Pub Allow",), ("Pub Topic:anything",), None),
    Case("Topic:* does not match a group", RESOURCE + ": the types differ",
         ("Custom Topic:* Sub Allow",), ("Sub Group:billing",), "no rule allows"),
    Case("a group rule does not match the topic of the same name", RESOURCE + ": types differ",
         ("Custom Group:orders Sub Allow",), ("Sub Topic:orders",), "no rule allows"),
    Case("* matches every type", RESOURCE + " ResourceType.ANY",
         ("Custom * Get Allow",), ("Get Group:g", "Get Topic:t", "Get Cluster:c"), None),
    # actions
    Case("an action the entry lacks is not allowed", "AuthorizationEvaluatorTest.evaluate4",
         ("Custom Topic:test* Pub Allow 192.168.0.0/24",), ("Sub Topic:test",), "no rule allows"),
    Case("All grants every action", ACTION + ": contains(Action.ALL)",
         ("Custom Topic:orders All Allow",),
         ("Pub Topic:orders", "Sub Topic:orders", "Delete Topic:orders"), None),
    Case("any one of the wanted actions suffices", ACTION + ": actions.stream().anyMatch",
         ("Custom Topic:orders Get Allow",), ("Sub|Get Topic:orders",), None),
    Case("a check for Any matches every entry", ACTION + ": contains(Action.ANY)",
         ("Custom Topic:orders Create Allow",), ("Any Topic:orders",), None),
    Case("entries are filtered by action before they are ranked", POLICIES + " then " + ORDER,
         ("Custom Topic:orders Pub Allow", "Custom Topic:* All Deny"),
         ("Sub Topic:orders",), "denied by the rule on Topic:*"),
    # precedence: the most specific entry decides, DENY or ALLOW
    Case("evaluate5: a literal Deny beats a prefix Allow", "AuthorizationEvaluatorTest.evaluate5",
         EVALUATE5, ("Pub Topic:test-1",), "denied by the rule on Topic:test-1"),
    Case("evaluate5: a prefix Allow beats Topic:* Deny", "AuthorizationEvaluatorTest.evaluate5",
         EVALUATE5, ("Pub Topic:test-2",), None),
    Case("evaluate5: Topic:* Deny beats * Allow", "AuthorizationEvaluatorTest.evaluate5",
         EVALUATE5, ("Pub Topic:abc",), "denied by the rule on Topic:*"),
    Case("evaluate5: only * covers the group", "AuthorizationEvaluatorTest.evaluate5",
         EVALUATE5, ("Sub Group:test-2",), None),
    Case("evaluate9: the literal Deny decides", "AuthorizationEvaluatorTest.evaluate9 (#9539)",
         EVALUATE9, ("Pub Topic:test_001",), "denied by the rule on Topic:test_001"),
    Case("the longer prefix decides (5.3.3's code: the shorter)", ORDER + ", fixed by #9539",
         EVALUATE9, ("Pub Topic:test_002",), "denied by the rule on Topic:test_*"),
    Case("a literal beats a prefix, Allow over Deny", ORDER + ", fixed by #9539",
         ("Custom Topic:ord* Pub Deny", "Custom Topic:orders Pub Allow"),
         ("Pub Topic:orders",), None),
    Case("a literal beats a prefix, listed first", ORDER + ", fixed by #9539",
         ("Custom Topic:orders Pub Allow", "Custom Topic:ord* Pub Deny"),
         ("Pub Topic:orders",), None),
    Case("a prefix beats Topic:*", ORDER + ", fixed by #9539",
         ("Custom Topic:* Pub Allow", "Custom Topic:ord* Pub Deny"),
         ("Pub Topic:orders",), "denied by the rule on Topic:ord*"),
    Case("Topic:* beats *", ORDER + ": ResourceType.ANY last",
         ("Custom * All Deny", "Custom Topic:* Pub Allow"), ("Pub Topic:orders",), None),
    Case("on a tie DENY beats ALLOW", ORDER + " comment, fixed by #9784",
         ("Custom Topic:orders Pub Allow", "Custom Topic:orders Pub Deny"),
         ("Pub Topic:orders",), "denied by the rule on Topic:orders", raw=True),
    Case("on a tie DENY beats ALLOW, listed first", ORDER + " comment, fixed by #9784",
         ("Custom Topic:orders Pub Deny", "Custom Topic:orders Pub Allow"),
         ("Pub Topic:orders",), "denied by the rule on Topic:orders", raw=True),
    Case("an update on the same resource replaces its entry", "Policy.updateEntry",
         ("Custom Topic:orders Pub Allow", "Custom Topic:orders Pub Deny"),
         ("Pub Topic:orders",), "denied by the rule on Topic:orders"),
    Case("an update on the same resource replaces a Deny", "Policy.updateEntry",
         ("Custom Topic:orders Pub Deny", "Custom Topic:orders Pub Allow"),
         ("Pub Topic:orders",), None),
    # CUSTOM before DEFAULT
    Case("evaluate8: a CUSTOM Deny holds", "AuthorizationEvaluatorTest.evaluate8",
         ("Custom Topic:test* Pub Deny 192.168.0.0/24", "Default Topic:* Pub Allow"),
         ("Pub Topic:test",), "denied by the rule on Topic:test*"),
    Case("evaluate8: DEFAULT decides what CUSTOM does not cover",
         "AuthorizationEvaluatorTest.evaluate8",
         ("Custom Topic:test* Pub Deny 192.168.0.0/24", "Default Topic:* Pub Allow"),
         ("Pub Topic:abc",), None),
    Case("DEFAULT is not read when CUSTOM has a candidate", POLICIES + ": isEmpty(policyEntries)",
         ("Custom Topic:* Pub Allow", "Default Topic:orders Pub Deny"), ("Pub Topic:orders",),
         None),
    Case("a CUSTOM entry lacking the action leaves it to DEFAULT", POLICIES,
         ("Custom Topic:orders Pub Allow", "Default Topic:* Sub Allow"), ("Sub Topic:orders",),
         None),
    # source IPs
    Case("a source IP in the CIDR", "AuthorizationEvaluatorTest.evaluate1",
         ("Custom Topic:test* Pub Allow 192.168.0.0/24",), ("Pub Topic:test",), None),
    Case("a source IP outside the CIDR", "AuthorizationEvaluatorTest.evaluate4",
         ("Custom Topic:test* Pub Allow 192.168.0.0/24",), ("Pub Topic:test",),
         "address 10.10.0.1 is not allowed to Pub on Topic:test", ip="10.10.0.1"),
    Case("no source IPs: from anywhere", "AuthorizationEvaluatorTest.evaluate1; " + ENV,
         ("Custom Topic:test* Pub Allow",), ("Pub Topic:test",), None, ip="203.0.113.9"),
    Case("a single IP matches that address only", ENV + ": no '/': equals",
         ("Custom Topic:t Pub Allow 10.1.1.1",), ("Pub Topic:t",), "not allowed", ip="10.1.1.2"),
    Case("any one of several source IPs", ENV + ": for each sourceIp",
         ("Custom Topic:t Pub Allow 10.1.1.1,172.16.0.0/12",), ("Pub Topic:t",), None,
         ip="172.20.1.1"),
    Case("an IPv6 CIDR", ENV,
         ("Custom Topic:t Pub Allow fd00::/8",), ("Pub Topic:t",), None, ip="fd12::1"),
    Case("an IPv4 address is not in an IPv6 CIDR", ENV,
         ("Custom Topic:t Pub Allow fd00::/8",), ("Pub Topic:t",), "not allowed", ip="10.0.0.1"),
    Case("the address filters before ranking", POLICIES + ": isMatchEnvironment filter",
         ("Custom Topic:orders Pub Allow 10.0.0.0/8", "Custom Topic:* Pub Deny"),
         ("Pub Topic:orders",), "denied by the rule on Topic:*"),
    Case("a Deny from one network only", POLICIES + ": isMatchEnvironment filter",
         ("Custom Topic:orders Pub Deny 10.0.0.0/8", "Custom Topic:* Pub Allow"),
         ("Pub Topic:orders",), None),
    Case("a Deny from one network, from there", POLICIES + ": isMatchEnvironment filter",
         ("Custom Topic:orders Pub Deny 10.0.0.0/8", "Custom Topic:* Pub Allow"),
         ("Pub Topic:orders",), "denied by the rule on Topic:orders", ip="10.9.9.9"),
    Case("CUSTOM entries refused by address leave it to DEFAULT", POLICIES,
         ("Custom Topic:orders Pub Allow 10.0.0.0/8", "Default Topic:* Pub Allow"),
         ("Pub Topic:orders",), None),
    # nothing matches: no permission
    Case("no rules at all", "AclAuthorizationHandler.handle: acl == null",
         (), ("Pub Topic:orders",), "no rule allows Pub on Topic:orders"),
    Case("rules, none on this resource", "AclAuthorizationHandler.handle: no matched policies",
         ("Custom Group:g Sub Allow",), ("Pub Topic:orders",), "no rule allows"),
    Case("every need must be allowed", "AuthorizationEvaluator.evaluate: each context",
         ("Custom Topic:t Sub Allow",), ("Sub Topic:t", "Sub Group:g"),
         "no rule allows Sub on Group:g"),
    Case("a request that needs nothing", "AuthorizationEvaluator.evaluate: empty contexts",
         (), (), None),
    # users: SUPER passes, NORMAL follows its rules
    Case("a SUPER user without rules", "UserAuthorizationHandler.handle: UserType.SUPER",
         (), ("Update Cluster:c", "Pub Topic:t"), None, user=UserType.SUPER),
    Case("a SUPER user despite a Deny", "UserAuthorizationHandler.handle: UserType.SUPER",
         ("Custom * All Deny",), ("Pub Topic:t",), None, user=UserType.SUPER),
    Case("a NORMAL user with * All", "UserAuthorizationHandler then AclAuthorizationHandler",
         ("Custom * All Allow",), ("Update Cluster:c",), None),
]


@pytest.mark.parametrize("case", RULES, ids=lambda c: c.name)
def test_rule(case: Case) -> None:
    user = User("u", "secret", case.user)
    why = authorize(user, acl_of(case), needs_of(case), case.ip)
    if case.expect is None:
        assert why is None, f"{case.apache}: expected allowed, got {why!r}"
    else:
        assert why is not None and case.expect in why, f"{case.apache}: got {why!r}"


def test_rules_belong_to_one_user_and_there_are_no_roles(tmp_path: Path) -> None:
    """5.3 `SubjectType` has USER only (`getByName`: case-insensitive); rules are per user."""
    assert subject_name("user:alice") == "alice"
    with pytest.raises(AuthInputError):
        subject_name("Role:ops")
    store = AuthStore(str(tmp_path))
    guard = AccessGuard(lambda c: broker_needs(c, "C"), authentication=True,
                        authorization=True, needs_key=needs_key)
    store.on_change = guard.install
    alice, bob = Credentials("alice", "alice-secret"), Credentials("bob", "bob-secret")
    for who in (alice, bob):
        store.create_user(User(who.access_key, who.secret_key))
    store.put_acl(Acl("User:alice", (Policy(PolicyType.CUSTOM, (
        PolicyEntry(Resource.parse("Topic:orders"), (Action.PUB,)),)),)))
    send = request(C.SEND_MESSAGE_V2, {"a": "pg", "b": "orders"}, b"m")
    assert guard.refusal(sign(send, alice), "10.0.0.1:1") is None
    assert "User:bob from 10.0.0.1: no rule allows Pub on Topic:orders" in (
        guard.refusal(sign(send, bob), "10.0.0.1:1") or "")


# --------------------------------------------------------------------------- ACL 1.0

SECRET = "secret-123"


def send(topic: str) -> RemotingCommand:
    return request(C.SEND_MESSAGE_V2, {"a": "pg", "b": topic}, b"m")


def pull(topic: str, group: str) -> RemotingCommand:
    return request(C.PULL_MESSAGE, {"topic": topic, "consumerGroup": group, "queueId": "0"})


def create_topic(topic: str) -> RemotingCommand:
    return request(C.UPDATE_AND_CREATE_TOPIC, {"topic": topic})


@dataclass(frozen=True)
class V1Case:
    name: str
    #: The 4.9.7 rule this case checks (and the 5.3 mapping it goes through).
    apache: str
    #: The account's fields besides accessKey/secretKey.
    account: dict[str, Any]
    cmd: RemotingCommand
    allowed: bool
    ip: str = "127.0.0.1"
    #: "ok": signed with the account's secret; "bad": a wrong secret; "none": unsigned.
    signed: str = "ok"
    global_whites: list[str] = field(default_factory=list)


NAMED = {"defaultTopicPerm": "SUB", "defaultGroupPerm": "SUB"}
CHECK = "PlainPermissionManager.checkPerm"
PARSE = "Permission.parsePermFromString"

V1 = [
    V1Case("admin without perms is SUPER", "checkPerm: ownedPermMap == null && isAdmin; "
           "5.3 AuthMigrator.createUser: admin -> SUPER", {"admin": True},
           create_topic("anything"), True),
    V1Case("admin without perms publishes anywhere", "checkPerm: ownedPermMap == null && admin",
           {"admin": True}, send("anything"), True),
    V1Case("a non-admin may not run an admin code", "checkPerm: Permission.needAdminPerm",
           {"defaultTopicPerm": "PUB|SUB"}, create_topic("topicA"), False),
    V1Case("an admin with perms runs admin codes", "checkPerm: needAdminPerm passes for admin",
           {"admin": True, "topicPerms": ["topicB=SUB"]}, create_topic("topicZ"), True),
    V1Case("an admin with perms is held to them", "checkPerm: ownedPermMap != null",
           {"admin": True, "defaultTopicPerm": "DENY", "topicPerms": ["topicB=SUB"]},
           send("topicB"), False),
    V1Case("a named PUB perm allows Pub", CHECK + ": ownedPermMap.get(resource)",
           {**NAMED, "topicPerms": ["topicA=PUB"]}, send("topicA"), True),
    V1Case("a named perm never falls back to the default", CHECK + ": containsKey(resource); "
           "AuthMigrator alone would fall back (DEFAULT Topic:* Sub)",
           {**NAMED, "topicPerms": ["topicA=PUB"]}, pull("topicA", "groupZ"), False),
    V1Case("a named DENY beats a permissive default", "Permission.checkPermission: DENY bit",
           {"defaultTopicPerm": "PUB|SUB", "topicPerms": ["topicA=DENY"]}, send("topicA"),
           False),
    V1Case("SUB|PUB grants both", PARSE + ": SUB_PUB",
           {"topicPerms": ["topicA=SUB|PUB"], "groupPerms": ["groupA=SUB"]},
           pull("topicA", "groupA"), True),
    V1Case("an unnamed topic takes the default", CHECK + ": getDefaultTopicPerm",
           {"defaultTopicPerm": "PUB"}, send("topicZ"), True),
    V1Case("no default topic perm means DENY", PARSE + "(null) = DENY",
           {"defaultGroupPerm": "SUB"}, send("topicZ"), False),
    V1Case("a group perm is checked on the group", "Permission.parseResourcePerms: retry topic",
           {"defaultTopicPerm": "SUB", "groupPerms": ["groupA=PUB"]}, pull("topicZ", "groupA"),
           False),
    V1Case("an unnamed group takes the default group perm", CHECK + ": getDefaultGroupPerm",
           {"defaultTopicPerm": "SUB", "defaultGroupPerm": "SUB"}, pull("topicZ", "groupZ"),
           True),
    V1Case("no default group perm means DENY", PARSE + "(null) = DENY",
           {"defaultTopicPerm": "SUB"}, pull("topicZ", "groupZ"), False),
    V1Case("sending back to a retry topic needs Sub on the group",
           "PlainAccessValidator.parse: retry topic -> SUB on the group",
           {"defaultTopicPerm": "DENY", "groupPerms": ["groupB=SUB"]},
           request(C.SEND_MESSAGE_V2, {"a": "groupB", "b": "%RETRY%groupB"}, b"m"), True),
    V1Case("perms are case-sensitive: 'pub' is DENY", PARSE + ": switch on the trimmed text",
           {"topicPerms": ["topicA=pub"], "defaultTopicPerm": "DENY"}, send("topicA"), False),
    V1Case("'PUB | SUB' is not PUB|SUB", PARSE + ": only the ends are trimmed",
           {"defaultTopicPerm": "PUB | SUB"}, send("topicA"), False),
    V1Case("an unknown perm is DENY", PARSE + ": default -> DENY",
           {"defaultTopicPerm": "PUB", "topicPerms": ["topicA=READ"]}, send("topicA"), False),
    V1Case("an unknown perm denies only its topic", PARSE + ": default -> DENY",
           {"defaultTopicPerm": "PUB", "topicPerms": ["topicA=READ"]}, send("topicB"), True),
    V1Case("a topic named twice: the last perm counts",
           "PlainAccessResource.addResourceAndPerm: HashMap.put",
           {"topicPerms": ["topicA=DENY", "topicA=PUB"]}, send("topicA"), True),
    V1Case("a topic named twice, DENY last", "PlainAccessResource.addResourceAndPerm",
           {"topicPerms": ["topicA=PUB", "topicA=DENY"]}, send("topicA"), False),
    V1Case("trace data may be sent whatever the perms",
           "PlainPermissionManager.validate: RMQ_SYS_TRACE_TOPIC needing PUB skips checkPerm",
           {"defaultTopicPerm": "DENY"}, send("RMQ_SYS_TRACE_TOPIC"), True),
    V1Case("trace data may be sent even when the topic is denied",
           "PlainPermissionManager.validate: the skip precedes checkPerm",
           {"topicPerms": ["RMQ_SYS_TRACE_TOPIC=DENY"]}, send("RMQ_SYS_TRACE_TOPIC"), True),
    V1Case("the trace topic is not readable by that rule", "validate: the skip is for PUB only",
           {"defaultTopicPerm": "DENY", "defaultGroupPerm": "SUB"},
           pull("RMQ_SYS_TRACE_TOPIC", "groupZ"), False),
    V1Case("the trace topic's read follows a named perm", CHECK,
           {"topicPerms": ["RMQ_SYS_TRACE_TOPIC=DENY"], "defaultTopicPerm": "SUB",
            "defaultGroupPerm": "SUB"}, pull("RMQ_SYS_TRACE_TOPIC", "groupZ"), False),
    V1Case("the trace topic's read follows the default", CHECK + ": getDefaultTopicPerm",
           {"defaultTopicPerm": "SUB", "defaultGroupPerm": "SUB"},
           pull("RMQ_SYS_TRACE_TOPIC", "groupZ"), True),
    V1Case("a global white address needs no signature", "validate: globalWhiteRemoteAddress "
           "first", {"defaultTopicPerm": "DENY"}, send("topicA"), True, ip="10.10.103.7",
           signed="none", global_whites=["10.10.103.*"]),
    V1Case("other addresses still need one", "validate: then the accessKey",
           {"defaultTopicPerm": "PUB"}, send("topicA"), False, ip="10.10.104.7",
           signed="none", global_whites=["10.10.103.*"]),
    V1Case("the account's white address needs no valid signature or perm",
           "validate: ownedAccess.getRemoteAddressStrategy().match before the signature",
           {"whiteRemoteAddress": "192.168.1.*", "defaultTopicPerm": "DENY"}, send("topicA"),
           True, ip="192.168.1.9", signed="bad"),
    V1Case("elsewhere the account's signature is checked", "validate: calSignature",
           {"whiteRemoteAddress": "192.168.1.*", "defaultTopicPerm": "PUB"}, send("topicA"),
           False, ip="192.168.2.9", signed="bad"),
    V1Case("an unsigned request from a white address", "validate: accessKey null -> refused",
           {"whiteRemoteAddress": "192.168.1.*"}, send("topicA"), False, ip="192.168.1.9",
           signed="none"),
]


def v1_guard(tmp_path: Path, case: V1Case) -> AccessGuard:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    doc = {"globalWhiteRemoteAddresses": case.global_whites,
           "accounts": [{"accessKey": "account1", "secretKey": SECRET, **case.account}]}
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(doc))
    guard = AccessGuard(lambda c: broker_needs(c, "DefaultCluster"), authentication=True,
                        authorization=True, needs_key=needs_key)
    AuthStore(str(tmp_path / "config"), rocketmq_home=str(home), on_change=guard.install).load()
    return guard


@pytest.mark.parametrize("case", V1, ids=lambda c: c.name)
def test_v1_rule(tmp_path: Path, case: V1Case) -> None:
    guard = v1_guard(tmp_path, case)
    cmd = case.cmd
    if case.signed != "none":
        cmd = sign(cmd, Credentials("account1", SECRET if case.signed == "ok" else "wrong-one"))
    why = guard.refusal(cmd, f"{case.ip}:40000")
    assert (why is None) == case.allowed, f"4.9.7 {case.apache}: got {why!r}"


@pytest.mark.parametrize("perm", ["topicA=pub", "topicA=READ", "topicA", "topicA=PUB=SUB"])
def test_v1_update_refuses_a_perm_4_9_refuses(tmp_path: Path, perm: str) -> None:
    """4.9.7 `updateAccessConfig` -> `Permission.checkResourcePerms` (admin code 50)."""
    (tmp_path / "conf").mkdir()
    account = PlainAccessConfig(access_key="account1", secret_key=SECRET, topic_perms=[perm])
    with pytest.raises(AuthInputError):
        update_account(str(tmp_path), account)
    assert not (tmp_path / "conf" / "plain_acl.yml").exists()

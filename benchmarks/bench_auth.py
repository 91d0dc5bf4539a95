"""CPU time of the access check per request (no sockets): off, signature only, and full.

A Java-shaped SEND_MESSAGE_V2 (1 KiB body, 15 extFields) signed by a NORMAL user with Pub on
its topic goes through `AccessGuard.refusal` as the broker's dispatcher calls it; "off"
measures the dispatcher's own test of its `guard` attribute.  Each figure is
`time.process_time` per request (this process's CPU, so other load on the machine matters
less), median of 7 runs.  The broker's send path costs tens of microseconds per request, so
the check should be a small fraction of it with access control on and nothing without.
"""

from __future__ import annotations

import time

from benchmarks.machine import machine, percentile
from engine.auth.guard import AccessGuard, AuthTables
from engine.auth.model import (
    Acl,
    Action,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
    User,
)
from engine.auth.needs import broker_needs, needs_key
from engine.protocol.command import RemotingCommand, request
from engine.protocol.signature import Credentials, sign

SEND_V2 = {
    "a": "PeerProducerGroup_java", "b": "StubTopic", "c": "TBW102", "d": "4", "e": "3",
    "f": "0", "g": "1795305881681", "h": "0",
    "i": "KEYS\x01key-1795305881419-0\x02UNIQ_KEY\x01FD00000000000000000000000000022FAB30946E09"
         "6C29D8500000\x02WAIT\x01true\x02TAGS\x01TagA",
    "j": "0", "k": "false", "m": "false", "n": "broker-a",
}
N = 50_000


def _tables() -> AuthTables:
    user = User("app-user-1", "app-secret-1")
    topic = Resource(ResourceType.TOPIC, "StubTopic", ResourcePattern.LITERAL)
    acl = Acl(user.subject, (Policy(PolicyType.CUSTOM, (
        PolicyEntry(topic, (Action.PUB,)),
        PolicyEntry(Resource(ResourceType.GROUP, "g", ResourcePattern.LITERAL), (Action.SUB,)))),))
    return AuthTables({user.username: user}, {user.username: acl})


def _cpu_per_request(check: object, cmd: RemotingCommand) -> float:
    fn = check  # a callable(cmd, addr) or None
    start = time.process_time()
    for _ in range(N):
        if fn is not None:
            fn(cmd, "127.0.0.1:40000")  # type: ignore[operator]
    return (time.process_time() - start) / N * 1e6


def main() -> None:
    print(machine())
    cmd = sign(request(310, SEND_V2, b"x" * 1024), Credentials("app-user-1", "app-secret-1"))
    signed_only = AccessGuard(lambda c: broker_needs(c, "C"), authentication=True,
                              authorization=False)
    full = AccessGuard(lambda c: broker_needs(c, "C"), authentication=True, authorization=True,
                       needs_key=needs_key)
    for guard in (signed_only, full):
        guard.install(_tables())
        assert guard.refusal(cmd, "127.0.0.1:1") is None
    for label, check in (("off (guard is None)", None),
                         ("authentication only", signed_only.refusal),
                         ("authentication + authorization", full.refusal)):
        runs = [_cpu_per_request(check, cmd) for _ in range(7)]
        print(f"{label}: median {percentile(runs, 50):.2f} us CPU/request "
              f"(p90 {percentile(runs, 90):.2f}, min {min(runs):.2f}, {N} requests x 7 runs)")


if __name__ == "__main__":
    main()

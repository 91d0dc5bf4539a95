"""Replication operations: haStatus, switchover (planned) and failover (master dead).

How this works: the name servers say which brokers a broker name has; each one is asked its
HA status (GET_BROKER_HA_STATUS 907: role, epoch, offsets, its slaves or its master).
A switchover then runs these steps, each one on the `Timeline` (stderr):

  1. wipe write permission of the broker name on every name server (clients move away);
  2. fence the master (HA_FENCE_WRITES 9001): it refuses every write; its max offset is final;
  3. wait until the chosen slave has every byte up to that offset;
  4. promote the slave (NOTIFY_BROKER_ROLE_CHANGED 1008, epoch + 1) — the promotion point;
  5. demote the old master to a slave of the new one (1008), re-point the other slaves;
  6. wait until every name server lists the new master (the brokers re-register themselves);
  7. give write permission back on every name server;
  8. verify: the new master writable in the new epoch, the old one replicating from it.
A failure before step 4 rolls back (unfence, write permission back) and changes nothing.
A failover (the master is dead) promotes the most advanced slave after estimating what the
dead master had that this slave never acknowledged (from the highest master offset any
slave saw), re-points the other slaves and restores write permission.  The functions
return rows and print only through the timeline callback.  `SwitchChange` is either one as
the change runner's `Change` (operations/change.py), for `mqadmin switchover` / `failover`
and the dashboard's Replication screen alike.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.client.admin import MQAdmin
from engine.client.broker_call import BrokerCalls, decode_header
from engine.client.errors import ClientError, RequestCodeNotSupportedError
from engine.ha.status import HARuntimeInfo, messages_in
from engine.protocol.body.route import MASTER_ID, ClusterInfo
from engine.protocol.codes import RequestCode
from engine.protocol.header.ha import (
    FenceWritesRequestHeader,
    FenceWritesResponseHeader,
    NotifyBrokerRoleChangedRequestHeader,
    RoleChangedResponseHeader,
)
from engine.protocol.wire import to_ext
from mqadmin.config import Endpoint
from mqadmin.exit_codes import CliError, TargetNotFound, UsageProblem
from mqadmin.operations.change import Outcome, Planned, Progress
from mqadmin.operations.ha import legacy as ha_legacy

Row = dict[str, Any]

STATUS_COLUMNS = ("brokerName", "addr", "brokerId", "role", "epoch", "maxOffset", "writable",
                  "peer", "peerOffset", "behindBytes", "behindMessages", "behindSeconds",
                  "connectionAgeMs", "note")
#: A master's row when no slave is connected (after a failover, or its slaves are down).
NO_SLAVE = "no slave connected"
STEP_COLUMNS = ("step", "elapsedMs", "result", "detail")
STATUS_TIMEOUT = 3.0
ROLE_TIMEOUT = 30.0  # a role change re-registers with every name server before answering


class HACalls(BrokerCalls):
    """The replication requests of a broker."""

    async def ha_status(self, addr: str, timeout: float = STATUS_TIMEOUT) -> HARuntimeInfo:
        resp = await self._call(addr, RequestCode.GET_BROKER_HA_STATUS, timeout=timeout)
        return HARuntimeInfo.decode(resp.body or b"{}")

    async def fence(self, addr: str, fenced: bool, reason: str) -> FenceWritesResponseHeader:
        resp = await self._call(addr, RequestCode.HA_FENCE_WRITES,
                                to_ext(FenceWritesRequestHeader(fenced, reason)))
        return decode_header(FenceWritesResponseHeader, resp, addr)

    async def role_changed(self, addr: str, header: NotifyBrokerRoleChangedRequestHeader
                           ) -> RoleChangedResponseHeader:
        resp = await self._call(addr, RequestCode.NOTIFY_BROKER_ROLE_CHANGED, to_ext(header),
                                timeout=ROLE_TIMEOUT)
        return decode_header(RoleChangedResponseHeader, resp, addr)


class RolledBack(CliError):
    """A switchover stopped before the promotion and undid its steps."""


class LossNotAccepted(UsageProblem):
    """A failover would lose acknowledged data and --accept-loss was not given."""


@dataclass(frozen=True, slots=True)
class Member:
    """One broker of a broker name, as the name servers list it, and its HA status."""

    name: str
    addr: str
    broker_id: int  # as registered
    status: HARuntimeInfo | None
    error: str | None = None
    note: str | None = None  # how the status was had, when not by the HA status request

    @property
    def max_offset(self) -> int:
        return self.status.commit_log_max_offset if self.status else -1


async def members(admin: MQAdmin, broker_name: str, *,
                  info: ClusterInfo | None = None) -> list[Member]:
    """Every registered broker of `broker_name` with its HA status (None if unreachable),
    as `info` (else the name servers, asked now) lists them.

    Raises:
        TargetNotFound: no name server knows the broker name.
    """
    if info is None:
        info = await admin.namesrv.cluster_info()
    data = info.broker_addr_table.get(broker_name)
    if data is None or not data.broker_addrs:
        known = ", ".join(sorted(info.broker_addr_table)) or "none"
        raise TargetNotFound(f"broker name '{broker_name}' is not registered (known: {known})."
                             " Check it with `mqadmin clusterList`.")
    calls = HACalls(admin.client, admin.broker.timeout)

    async def one(broker_id: int, addr: str) -> Member | None:
        """The member, or None for a broker without the HA status request (Apache 4.x)."""
        try:
            return Member(broker_name, addr, broker_id, await calls.ha_status(addr))
        except RequestCodeNotSupportedError:
            return None
        except ClientError as exc:
            return Member(broker_name, addr, broker_id, None, str(exc).splitlines()[0])

    addrs = sorted(data.broker_addrs.items())
    found = await asyncio.gather(*(one(i, a) for i, a in addrs))
    if all(m is not None for m in found):
        return [m for m in found if m is not None]
    derived = await ha_legacy.derived_status(admin, broker_name, dict(addrs))
    out: list[Member] = []
    for (broker_id, addr), m in zip(addrs, found, strict=True):
        if m is None:
            got = derived[addr]
            m = (Member(broker_name, addr, broker_id, None, str(got).splitlines()[0])
                 if isinstance(got, ClientError)
                 else Member(broker_name, addr, broker_id, got, note=ha_legacy.DERIVED_NOTE))
        out.append(m)
    return out


def status_rows(found: list[Member]) -> list[Row]:
    """One row per master-slave link: a master's row per connected slave, a slave's row
    towards its master (peerOffset: the master offset it last saw; behind: what it lacks)."""
    rows: list[Row] = []
    for m in found:
        s = m.status
        if s is None:
            rows.append({"brokerName": m.name, "addr": m.addr, "brokerId": m.broker_id,
                         "role": f"unreachable: {m.error}"})
            continue
        base = {"brokerName": m.name, "addr": m.addr, "brokerId": s.broker_id,
                "role": s.broker_role, "epoch": None if m.note else s.epoch,
                "maxOffset": s.commit_log_max_offset,
                "writable": s.master and s.writes_refused is None}
        if m.note:
            base["note"] = m.note
        if s.master:
            rows += [{**base, "peer": c.addr, "peerOffset": c.slave_ack_offset,
                      "behindBytes": c.diff, "behindMessages": c.estimated_messages_behind,
                      "behindSeconds": None if m.note else c.estimated_seconds_behind,
                      "connectionAgeMs": None if m.note else c.connection_age_ms}
                     for c in s.ha_connection_info]
            if not s.ha_connection_info:
                rows.append({**base, "note": no_slave_note(s.broker_role)})
        else:
            c2 = s.ha_client_runtime_info
            rows.append({**base, "peer": c2.master_addr, "peerOffset": c2.master_max_offset_seen,
                         "behindBytes": c2.estimated_loss_bytes,
                         "behindMessages": c2.estimated_loss_messages,
                         "connectionAgeMs": c2.connection_age_ms if c2.is_activated else None})
    return rows


def no_slave_note(role: str) -> str:
    """What a master without slaves means for its senders."""
    if role == "SYNC_MASTER":
        return (f"{NO_SLAVE}: as a SYNC_MASTER it answers every send SLAVE_NOT_AVAILABLE "
                "(stored on the master only) until a slave connects")
    return f"{NO_SLAVE}: messages are on this master only"


def status_warnings(rows: list[Row]) -> list[str]:
    """One warning per master without slaves, for stderr."""
    return [f"{r['brokerName']} master {r['addr']}: {r['note']}; start or restart a slave "
            "of it (it replicates once connected)."
            for r in rows if str(r.get("note", "")).startswith(NO_SLAVE)]


async def read_members(admin: MQAdmin, broker_names: list[str] | None = None, *,
                       info: ClusterInfo | None = None) -> dict[str, list[Member]]:
    """The members of each broker name (every one `info` lists, by default), from one
    cluster listing, all asked at once.

    Raises:
        TargetNotFound: a broker name is not registered.
    """
    if info is None:
        info = await admin.namesrv.cluster_info()
    names = broker_names if broker_names is not None else sorted(info.broker_addr_table)
    found = await asyncio.gather(*(members(admin, name, info=info) for name in names))
    return dict(zip(names, found, strict=True))


async def status_of(admin: MQAdmin, broker_names: list[str] | None) -> list[Row]:
    """haStatus's rows of the broker names (every one by default), in their order."""
    found = await read_members(admin, broker_names)
    return [row for group in found.values() for row in status_rows(group)]


async def broker_name_of(admin: MQAdmin, name_or_addr: str) -> tuple[str, str | None]:
    """The broker name meant by a broker name or a registered broker's address (Apache 5's
    haStatus takes `-b` as an address), with that address (None for a name).

    Raises:
        TargetNotFound: neither a registered broker name nor a registered address.
    """
    info = await admin.namesrv.cluster_info()
    if name_or_addr in info.broker_addr_table:
        return name_or_addr, None
    for name, data in info.broker_addr_table.items():
        if name_or_addr in data.broker_addrs.values():
            return name, name_or_addr
    known = ", ".join(sorted(info.broker_addr_table)) or "none"
    raise TargetNotFound(f"'{name_or_addr}' is neither a registered broker name (known: {known})"
                         " nor a registered broker address. Check it with `mqadmin clusterList`.")


async def cluster_broker_names(admin: MQAdmin, cluster: str) -> list[str]:
    info = await admin.namesrv.cluster_info()
    names = sorted(info.cluster_addr_table.get(cluster, ()))
    if not names:
        raise TargetNotFound(f"cluster '{cluster}' is unknown; check it with "
                             "`mqadmin clusterList`.")
    return names


class Timeline:
    """Steps with the time since the start, told to `say` as they happen and kept as rows."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.started = time.monotonic()
        self.rows: list[Row] = []

    def step(self, step: str, result: str, detail: str = "") -> None:
        ms = int((time.monotonic() - self.started) * 1000)
        self.rows.append({"step": step, "elapsedMs": ms, "result": result, "detail": detail})
        self.say(f"[{ms / 1000:8.3f}s] {step}: {result}" + (f" — {detail}" if detail else ""))


# ---------------------------------------------------------------------------- planning


@dataclass(frozen=True, slots=True)
class SwitchPlan:
    broker_name: str
    master: Member | None  # None: dead (failover)
    slave: Member
    others: list[Member]
    new_epoch: int
    behind_bytes: int  # switchover: what the slave lacks now; failover: the estimated loss
    behind_messages: int
    master_role: str

    @property
    def rows(self) -> list[Row]:
        return [{"brokerName": self.broker_name,
                 "master": self.master.addr if self.master else "(dead)",
                 "promote": self.slave.addr, "newEpoch": self.new_epoch,
                 "role": self.master_role, "behindBytes": self.behind_bytes,
                 "behindMessages": self.behind_messages,
                 "others": ", ".join(m.addr for m in self.others) or "-"}]


PLAN_COLUMNS = ("brokerName", "master", "promote", "newEpoch", "role", "behindBytes",
                "behindMessages", "others")


def _pick(slaves: list[Member], slave_addr: str | None) -> Member:
    if slave_addr is not None:
        chosen = next((m for m in slaves if m.addr == slave_addr), None)
        if chosen is None:
            listed = ", ".join(m.addr for m in slaves) or "none"
            raise TargetNotFound(f"{slave_addr} is not a reachable slave of this broker name "
                                 f"(slaves: {listed}); see `mqadmin haStatus`.")
        return chosen
    if not slaves:
        raise CliError("no reachable slave to promote; start one, or check `mqadmin haStatus`.")
    return max(slaves, key=lambda m: m.max_offset)


def _switchable(found: list[Member], broker_name: str) -> None:
    """Raises: CliError when a member has no HA requests (an Apache 4.x broker)."""
    old = [m.addr for m in found if m.note]
    if old:
        raise CliError(f"{broker_name} runs brokers without role change requests (Apache 4.x: "
                       f"{', '.join(old)}); switch them by restarting with another brokerRole.")


def _epoch_after(found: list[Member]) -> int:
    return max((m.status.epoch for m in found if m.status is not None), default=0) + 1


async def plan_switchover(admin: MQAdmin, broker_name: str, slave_addr: str | None) -> SwitchPlan:
    """Raises: CliError (no live master, no usable slave), TargetNotFound."""
    found = await members(admin, broker_name)
    _switchable(found, broker_name)
    master = next((m for m in found if m.status is not None and m.status.master), None)
    if master is None or master.status is None:
        raise CliError(f"{broker_name} has no reachable master: use `mqadmin failover -b "
                       f"{broker_name}` to promote a slave.")
    slaves = [m for m in found if m.status is not None and not m.status.master]
    slave = _pick(slaves, slave_addr)
    assert slave.status is not None
    client = slave.status.ha_client_runtime_info
    if not client.is_activated:
        raise CliError(f"slave {slave.addr} is not connected to the master, so it cannot catch "
                       "up: fix its replication first (see `mqadmin haStatus`).")
    behind = max(master.max_offset - slave.max_offset, 0)
    return SwitchPlan(broker_name, master, slave, [m for m in slaves if m is not slave],
                      _epoch_after(found), behind,
                      messages_in(behind, master.status.average_record_size),
                      master.status.broker_role)


async def plan_failover(admin: MQAdmin, broker_name: str, slave_addr: str | None,
                        role: str) -> SwitchPlan:
    """Raises: CliError (a live master, no slave), TargetNotFound."""
    found = await members(admin, broker_name)
    _switchable(found, broker_name)
    alive = next((m for m in found if m.status is not None and m.status.master), None)
    if alive is not None:
        raise CliError(f"the master {alive.addr} of {broker_name} is alive: use `mqadmin "
                       f"switchover -b {broker_name}`, which loses nothing.")
    slaves = [m for m in found if m.status is not None]
    slave = _pick(slaves, slave_addr)
    assert slave.status is not None
    seen = max(m.status.ha_client_runtime_info.master_max_offset_seen
               for m in slaves if m.status is not None)
    loss = max(seen - slave.max_offset, 0)
    return SwitchPlan(broker_name, None, slave, [m for m in slaves if m is not slave],
                      _epoch_after(found), loss,
                      messages_in(loss, slave.status.average_record_size), role)


# ---------------------------------------------------------------------------- applying


async def _on_namesrvs(admin: MQAdmin, what: str, call: Callable[[str], Any]) -> str:
    outcomes = await admin.namesrv.on_each(call)
    failed = [o for o in outcomes if not o.ok]
    if len(failed) == len(outcomes):
        raise CliError(f"{what} failed on every name server: {failed[0].error}")
    return f"{len(outcomes) - len(failed)} of {len(outcomes)} name servers" + (
        f" ({', '.join(o.addr for o in failed)} failed)" if failed else "")


async def _until(check: Callable[[], Any], timeout: float, poll: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if await check():
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(poll)


async def _listed_master(admin: MQAdmin, broker_name: str, addr: str) -> bool:
    """Whether every name server lists `addr` as the master of `broker_name`."""
    outcomes = await admin.namesrv.on_each(lambda ns: admin.namesrv.cluster_info(addr=ns))
    for o in outcomes:
        data = o.value.broker_addr_table.get(broker_name) if o.value else None
        if o.ok and (data is None or data.broker_addrs.get(MASTER_ID) != addr):
            return False
    return any(o.ok for o in outcomes)


async def switchover(admin: MQAdmin, plan: SwitchPlan, timeline: Timeline,
                     catch_up_timeout: float) -> list[Row]:
    """Run a planned switchover (see the module docstring); returns the timeline rows.

    Raises:
        RolledBack: a step before the promotion failed; everything was undone.
        CliError: a step after the promotion failed (the message says what to check).
    """
    calls = HACalls(admin.client, admin.broker.timeout)
    name, master, slave = plan.broker_name, plan.master, plan.slave
    assert master is not None and slave.status is not None
    wiped = fenced = False

    async def rollback(why: str) -> RolledBack:
        if fenced:
            await calls.fence(master.addr, False, "switchover rolled back")
            timeline.step("rollback", "master accepts writes again", master.addr)
        if wiped:
            done = await _on_namesrvs(admin, "add write perm",
                                      lambda ns: admin.namesrv.add_write_perm(name, addr=ns))
            timeline.step("rollback", "write permission restored", done)
        return RolledBack(f"switchover of {name} rolled back: {why}. Nothing changed; check "
                          "`mqadmin haStatus` and retry.")

    try:
        done = await _on_namesrvs(admin, "wipe write perm",
                                  lambda ns: admin.namesrv.wipe_write_perm(name, addr=ns))
        wiped = True
        timeline.step("write-protect", "write permission wiped", done)
        final = (await calls.fence(master.addr, True, f"switchover to {slave.addr}")).max_phy_offset
        fenced = True
        timeline.step("fence", f"master refuses writes; its log ends at {final}", master.addr)

        async def caught_up() -> bool:
            return (await calls.ha_status(slave.addr)).commit_log_max_offset >= final

        if not await _until(caught_up, catch_up_timeout):
            raise await rollback(f"{slave.addr} did not reach offset {final} within "
                                 f"{catch_up_timeout:g} s")
        timeline.step("catch-up", f"slave acknowledged every byte up to {final}", slave.addr)
        header = NotifyBrokerRoleChangedRequestHeader(
            slave.addr, plan.new_epoch, broker_role=plan.master_role)
        try:
            promoted = await calls.role_changed(slave.addr, header)
        except ClientError as exc:
            status = await _status_or_none(calls, slave.addr)
            if status is None or not status.master or status.epoch != plan.new_epoch:
                raise await rollback(f"promotion of {slave.addr} failed: {exc}") from None
            promoted = RoleChangedResponseHeader(status.broker_role, 0, status.epoch,
                                                 status.epoch_start_offset,
                                                 status.commit_log_max_offset)
    except ClientError as exc:
        raise await rollback(str(exc).splitlines()[0]) from None
    timeline.step("promote", f"master of epoch {promoted.epoch} from offset "
                  f"{promoted.epoch_start_offset}", slave.addr)
    await _follow(calls, timeline, plan, promoted, [(master, slave.status.broker_id)])
    await _finish(admin, calls, timeline, plan, old_master=master.addr)
    return timeline.rows


async def failover(admin: MQAdmin, plan: SwitchPlan, timeline: Timeline) -> list[Row]:
    """Promote the plan's slave of a dead master; returns the timeline rows.

    Raises:
        CliError: the promotion (or a later step) failed.
    """
    calls = HACalls(admin.client, admin.broker.timeout)
    header = NotifyBrokerRoleChangedRequestHeader(plan.slave.addr, plan.new_epoch,
                                                  broker_role=plan.master_role)
    promoted = await calls.role_changed(plan.slave.addr, header)
    timeline.step("promote", f"master of epoch {promoted.epoch} from offset "
                  f"{promoted.epoch_start_offset}", plan.slave.addr)
    await _follow(calls, timeline, plan, promoted, [])
    await _finish(admin, calls, timeline, plan, old_master=None)
    return timeline.rows


async def _status_or_none(calls: HACalls, addr: str) -> HARuntimeInfo | None:
    try:
        return await calls.ha_status(addr)
    except ClientError:
        return None


async def _follow(calls: HACalls, timeline: Timeline, plan: SwitchPlan,
                  promoted: RoleChangedResponseHeader, extra: list[tuple[Member, int]]) -> None:
    """Make the old master (switchover) and the other slaves follow the new master."""
    new = plan.slave
    assert new.status is not None
    followers = extra + [(m, m.status.broker_id) for m in plan.others if m.status is not None]
    for member, broker_id in followers:
        header = NotifyBrokerRoleChangedRequestHeader(
            new.addr, promoted.epoch, master_ha_address=new.status.ha_server_addr,
            broker_id=broker_id, epoch_start_offset=promoted.epoch_start_offset)
        try:
            await calls.role_changed(member.addr, header)
            timeline.step("follow", f"slave {broker_id} of the new master", member.addr)
        except ClientError as exc:
            timeline.step("follow", "FAILED (it is fenced when it next registers)",
                          f"{member.addr}: {str(exc).splitlines()[0]}")


async def _finish(admin: MQAdmin, calls: HACalls, timeline: Timeline, plan: SwitchPlan,
                  old_master: str | None) -> None:
    name, new = plan.broker_name, plan.slave.addr
    if await _until(lambda: _listed_master(admin, name, new), 10):
        timeline.step("re-register", "every name server lists the new master", new)
    else:
        timeline.step("re-register", "NOT CONFIRMED: a name server still lists another master",
                      "check `mqadmin clusterList`")
    done = await _on_namesrvs(admin, "add write perm",
                              lambda ns: admin.namesrv.add_write_perm(name, addr=ns))
    timeline.step("write-perm", "write permission restored", done)
    status = await calls.ha_status(new)
    if not status.master or status.writes_refused is not None:
        raise CliError(f"{new} was promoted but does not accept writes "
                       f"({status.writes_refused or status.broker_role}); check its log.")
    timeline.step("verify", f"{status.broker_role}, epoch {status.epoch}, accepts writes", new)
    if old_master is not None:
        async def following() -> bool:
            info = await _status_or_none(calls, old_master)
            return info is not None and info.ha_client_runtime_info.is_activated

        ok = await _until(following, 10)
        timeline.step("verify", "old master replicates from the new one" if ok else
                      "old master NOT replicating yet (see `mqadmin haStatus`)", old_master)


# ---------------------------------------------------------------------------- the change


class SwitchChange:
    """A switchover (the master is alive) or a failover (it is dead) for the change runner,
    its timeline steps reported as they happen; a failover's estimated loss is its risk."""

    def __init__(self, broker_name: str, *, failover: bool = False, slave: str | None = None,
                 role: str = "ASYNC_MASTER", catch_up_timeout: float = 30.0,
                 args: dict[str, Any] | None = None) -> None:
        """`args`: what the audit log records (default: the arguments `mqadmin failover` /
        `switchover` would have, `accept_loss` being whether the plan loses data)."""
        self.action = "failover" if failover else "switchover"
        self.broker_name = broker_name
        self.failover = failover
        self.slave = slave
        self.role = role
        self.catch_up_timeout = catch_up_timeout
        self.args = args

    async def plan(self, admin: MQAdmin, where: Endpoint,
                   progress: Progress) -> Planned[SwitchPlan]:
        if self.failover:
            plan = await plan_failover(admin, self.broker_name, self.slave, self.role)
        else:
            plan = await plan_switchover(admin, self.broker_name, self.slave)
        risk = ""
        if self.failover and plan.behind_bytes:
            risk = (f"Promoting {plan.slave.addr} loses an estimated {plan.behind_bytes:,} "
                    f"bytes (≈ {plan.behind_messages:,} messages) that the dead master had "
                    "and no slave received.")
        args = self.args
        if args is None:
            args = {"broker_name": self.broker_name, "slave": self.slave}
            if self.failover:  # a loss in the plan must be accepted to apply
                args |= {"accept_loss": bool(plan.behind_bytes), "role": self.role}
            else:
                args["timeout"] = self.catch_up_timeout
        return Planned(plan, self.action, plan.broker_name, args, plan.rows, PLAN_COLUMNS,
                       noun="brokers and name servers", risk=risk, counted="")

    async def apply(self, admin: MQAdmin, where: Endpoint, planned: Planned[SwitchPlan],
                    progress: Progress) -> Outcome:
        timeline = Timeline(progress.step)
        try:
            if self.failover:
                rows = await failover(admin, planned.plan, timeline)
            else:
                rows = await switchover(admin, planned.plan, timeline, self.catch_up_timeout)
        except Exception as exc:
            return Outcome.failed(exc, timeline.rows, STEP_COLUMNS)
        return Outcome(rows, STEP_COLUMNS)

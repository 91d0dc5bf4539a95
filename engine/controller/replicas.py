"""The replica-info state machine: broker sets, their ids, master, epochs and SyncStateSet.

How this works (as 5.3's `ReplicasInfoManager`, sans IO): a request is checked against the
current state by one method that returns an `Outcome` (the answer's code, header and body,
plus the events to replicate); nothing changes until the events are `apply`-ed, on every
controller, in log order.  Liveness and election data come in as functions, so the same
state machine runs under the single-node log and under Raft.

A broker set's master epoch counts masters (0: never had one); its SyncStateSet epoch
counts SyncStateSet changes, elections included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from engine.controller import elect as policy
from engine.controller.events import (
    AlterSyncStateSet,
    ApplyBrokerId,
    CleanBrokerData,
    ElectMaster,
    Event,
    UpdateBrokerAddress,
)
from engine.protocol.body.controller import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
)
from engine.protocol.codes import ResponseCode
from engine.protocol.header.controller import (
    FIRST_BROKER_CONTROLLER_ID,
    AlterSyncStateSetRequestHeader,
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdRequestHeader,
    ApplyBrokerIdResponseHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
)

#: (broker name, broker id) -> alive?  The heartbeat table answers it.
AlivePredicate = Callable[[str, int], bool]
#: (broker name, broker id) -> the broker's last heartbeat data, None when not alive.
LiveGetter = Callable[[str, int], policy.LiveInfo | None]


@dataclass(frozen=True, slots=True)
class Member:
    address: str
    register_check_code: str


@dataclass(frozen=True, slots=True)
class BrokerSet:
    cluster_name: str
    broker_name: str
    members: MappingProxyType[int, Member] = field(
        default_factory=lambda: MappingProxyType({}))
    next_broker_id: int = FIRST_BROKER_CONTROLLER_ID
    master_id: int | None = None
    master_epoch: int = 0
    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0

    def address(self, broker_id: int | None) -> str | None:
        member = self.members.get(broker_id) if broker_id is not None else None
        return member.address if member else None

    def member_group(self) -> BrokerMemberGroup:
        return BrokerMemberGroup(self.cluster_name, self.broker_name,
                                 {i: m.address for i, m in self.members.items()})

    def with_members(self, members: dict[int, Member]) -> BrokerSet:
        return replace(self, members=MappingProxyType(members))


@dataclass(frozen=True, slots=True)
class Outcome:
    """A request's answer and the events that make it true once replicated."""

    code: ResponseCode = ResponseCode.SUCCESS
    remark: str | None = None
    header: Any = None
    body: bytes | None = None
    events: tuple[Event, ...] = ()


class ReplicaState:
    """Every broker set this controller knows; changed only by `apply`."""

    def __init__(self) -> None:
        self.sets: dict[str, BrokerSet] = {}

    # ------------------------------------------------------------------ applying events

    def apply(self, event: Event) -> None:
        name = event.broker_name
        current = self.sets.get(name)
        if isinstance(event, ApplyBrokerId):
            if current is None:
                current = BrokerSet(event.cluster_name, name)
            if event.broker_id not in current.members:
                members = dict(current.members)
                members[event.broker_id] = Member(event.broker_address,
                                                  event.register_check_code)
                current = replace(current.with_members(members), next_broker_id=max(
                    current.next_broker_id, event.broker_id + 1))
            self.sets[name] = current
        elif current is None:
            return
        elif isinstance(event, UpdateBrokerAddress):
            old = current.members.get(event.broker_id)
            if old is not None:
                members = dict(current.members)
                members[event.broker_id] = replace(old, address=event.broker_address)
                self.sets[name] = current.with_members(members)
        elif isinstance(event, ElectMaster):
            if event.new_master_id is None:
                self.sets[name] = replace(current, master_id=None,
                                          master_epoch=current.master_epoch + 1)
            else:
                self.sets[name] = replace(
                    current, master_id=event.new_master_id,
                    master_epoch=current.master_epoch + 1,
                    sync_state_set=frozenset({event.new_master_id}),
                    sync_state_set_epoch=current.sync_state_set_epoch + 1)
        elif isinstance(event, AlterSyncStateSet):
            self.sets[name] = replace(current, sync_state_set=event.sync_state_set,
                                      sync_state_set_epoch=current.sync_state_set_epoch + 1)
        else:
            self._clean(current, event)

    def _clean(self, current: BrokerSet, event: CleanBrokerData) -> None:
        if not event.broker_ids:
            del self.sets[current.broker_name]
            return
        members = {i: m for i, m in current.members.items() if i not in event.broker_ids}
        in_sync = current.sync_state_set - event.broker_ids
        if not members or not in_sync:
            del self.sets[current.broker_name]
        else:
            self.sets[current.broker_name] = replace(current.with_members(members),
                                                     sync_state_set=in_sync)

    # ------------------------------------------------------------------ ids and registration

    def next_broker_id(self, req: GetNextBrokerIdRequestHeader) -> Outcome:
        current = self.sets.get(req.broker_name)
        next_id = current.next_broker_id if current else FIRST_BROKER_CONTROLLER_ID
        return Outcome(header=GetNextBrokerIdResponseHeader(req.cluster_name, req.broker_name,
                                                            next_id))

    def apply_broker_id(self, req: ApplyBrokerIdRequestHeader) -> Outcome:
        header = ApplyBrokerIdResponseHeader(req.cluster_name, req.broker_name)
        address = req.register_check_code.split(";")[0]
        event = ApplyBrokerId(req.cluster_name, req.broker_name, address,
                              req.applied_broker_id, req.register_check_code)
        current = self.sets.get(req.broker_name)
        if current is None:
            if req.applied_broker_id == FIRST_BROKER_CONTROLLER_ID:
                return Outcome(header=header, events=(event,))
            return Outcome(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                           f"Broker-set: {req.broker_name} hasn't been registered in "
                           f"controller, but broker try to apply brokerId: "
                           f"{req.applied_broker_id}", header)
        member = current.members.get(req.applied_broker_id)
        if member is None or member.register_check_code == req.register_check_code:
            return Outcome(header=header, events=(event,))
        return Outcome(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                       f"Fail to apply brokerId: {req.applied_broker_id} in broker-set: "
                       f"{req.broker_name}", header)

    def register_broker(self, req: RegisterBrokerToControllerRequestHeader,
                        alive: AlivePredicate) -> Outcome:
        header = RegisterBrokerToControllerResponseHeader(req.cluster_name, req.broker_name)
        current = self.sets.get(req.broker_name)
        if current is None:
            return Outcome(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                           f"Broker-set: {req.broker_name} hasn't been registered in "
                           "controller", header)
        if req.broker_id not in current.members:
            return Outcome(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                           f"BrokerId: {req.broker_id} hasn't been registered in broker-set: "
                           f"{req.broker_name}", header)
        master = current.master_id
        if master is not None and alive(req.broker_name, master):
            header = replace(header, master_broker_id=master,
                             master_address=current.address(master),
                             master_epoch=current.master_epoch,
                             sync_state_set_epoch=current.sync_state_set_epoch)
        events: tuple[Event, ...] = ()
        if current.address(req.broker_id) != req.broker_address:
            events = (UpdateBrokerAddress(req.cluster_name, req.broker_name,
                                          req.broker_address, req.broker_id),)
        return Outcome(header=header, body=_sync_state_body(current), events=events)

    # ------------------------------------------------------------------ reads

    def replica_info(self, broker_name: str) -> Outcome:
        current = self.sets.get(broker_name)
        if current is None:
            return Outcome(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                           "Broker metadata is not existed", GetReplicaInfoResponseHeader())
        return Outcome(header=GetReplicaInfoResponseHeader(
            current.master_id, current.address(current.master_id), current.master_epoch),
            body=_sync_state_body(current))

    def sync_state_data(self, broker_names: Iterable[str], alive: AlivePredicate) -> Outcome:
        table: dict[str, ReplicasInfo] = {}
        for name in broker_names:
            current = self.sets.get(name)
            if current is None:
                continue
            in_sync: list[ReplicaIdentity] = []
            not_in_sync: list[ReplicaIdentity] = []
            for broker_id, member in sorted(current.members.items()):
                replica = ReplicaIdentity(name, broker_id, member.address,
                                          alive(name, broker_id))
                (in_sync if broker_id in current.sync_state_set else not_in_sync).append(
                    replica)
            table[name] = ReplicasInfo(current.master_id, current.address(current.master_id),
                                       current.master_epoch, current.sync_state_set_epoch,
                                       in_sync, not_in_sync)
        return Outcome(body=BrokerReplicasInfo(table).encode())

    # ------------------------------------------------------------------ changes

    def alter_sync_state_set(self, req: AlterSyncStateSetRequestHeader, proposed: SyncStateSet,
                             alive: AlivePredicate) -> Outcome:
        header = AlterSyncStateSetResponseHeader()
        current = self.sets.get(req.broker_name)
        failed = ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
        if current is None:
            return Outcome(failed, "Broker metadata is not existed", header)
        new_set = proposed.sync_state_set
        if new_set == current.sync_state_set:
            return Outcome(failed, "The newSyncStateSet is equal with oldSyncStateSet, no "
                           "needed to update syncStateSet", header)
        if current.master_id is None or current.master_id != req.master_broker_id:
            return Outcome(ResponseCode.CONTROLLER_INVALID_MASTER,
                           "Rejecting alter syncStateSet request because the current leader "
                           f"is:{{{current.master_id}}}, not {{{req.master_broker_id}}}",
                           header)
        if req.master_epoch != current.master_epoch:
            return Outcome(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                           "Rejecting alter syncStateSet request because the current master "
                           f"epoch is:{{{current.master_epoch}}}, not {{{req.master_epoch}}}",
                           header)
        if proposed.sync_state_set_epoch != current.sync_state_set_epoch:
            return Outcome(ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                           "Rejecting alter syncStateSet request because the current "
                           f"syncStateSet epoch is:{{{current.sync_state_set_epoch}}}, not "
                           f"{{{proposed.sync_state_set_epoch}}}", header)
        for replica in sorted(new_set):
            if replica not in current.members:
                return Outcome(ResponseCode.CONTROLLER_INVALID_REPLICAS,
                               "Rejecting alter syncStateSet request because the replicas "
                               f"{{{replica}}} don't exist", header)
            if not alive(req.broker_name, replica):
                return Outcome(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
                               "Rejecting alter syncStateSet request because the replicas "
                               f"{{{replica}}} don't alive", header)
        if current.master_id not in new_set:
            return Outcome(failed, "Rejecting alter syncStateSet request because the "
                           "newSyncStateSet don't contains origin leader "
                           f"{{{current.master_id}}}", header)
        epoch = current.sync_state_set_epoch + 1
        return Outcome(header=AlterSyncStateSetResponseHeader(epoch),
                       body=SyncStateSet(new_set, epoch).encode(),
                       events=(AlterSyncStateSet(req.broker_name, new_set),))

    def elect_master(self, req: ElectMasterRequestHeader, live: LiveGetter,
                     unclean: bool) -> Outcome:
        """ELECT_MASTER from a broker, an operator (`designateElect`) or the controller
        itself (`brokerId` -1: the master went away)."""
        current = self.sets.get(req.broker_name)
        if current is None:
            return Outcome(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                           "Broker hasn't been registered", ElectMasterResponseHeader())
        name = req.broker_name
        new_master: int | None = None
        if current.master_epoch == 0:  # never had a master: the asking broker is the first
            new_master = req.broker_id
        if new_master is None or new_master == -1:
            preferred = req.broker_id if req.designate_elect else None
            new_master = policy.elect(
                current.sync_state_set, current.members.keys() if unclean else None,
                current.master_id, preferred, lambda i: live(name, i))
        old = current.master_id
        if new_master is not None and new_master == old:
            return Outcome(
                ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
                f"The old master {old} is still alive, not need to elect new master for "
                f"broker {name}",
                ElectMasterResponseHeader(old, current.address(old), current.master_epoch,
                                          current.sync_state_set_epoch),
                ElectMasterResponseBody(None, current.sync_state_set).encode())
        if new_master is not None:
            body = ElectMasterResponseBody(current.member_group(), frozenset({new_master}))
            return Outcome(header=ElectMasterResponseHeader(
                new_master, current.address(new_master), current.master_epoch + 1,
                current.sync_state_set_epoch + 1), body=body.encode(),
                events=(ElectMaster(name, new_master),))
        if req.broker_id == -1:
            return Outcome(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                           "Old master has down and failed to elect a new broker master",
                           ElectMasterResponseHeader(), events=(ElectMaster(name, None),))
        return Outcome(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
                       "Failed to elect a new master", ElectMasterResponseHeader())

    def clean_broker_data(self, req: CleanControllerBrokerDataRequestHeader,
                          alive: AlivePredicate) -> Outcome:
        invalid = ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
        ids_text = (req.broker_controller_ids_to_clean or "").strip()
        ids: frozenset[int] | None = None
        if ids_text:
            try:
                ids = frozenset(int(part) for part in ids_text.split(";"))
            except ValueError as exc:
                return Outcome(invalid, "Please set the option <brokerControllerIdsToClean> "
                               f"according to the format, exception: {exc}")
        current = self.sets.get(req.broker_name)
        if not req.is_clean_living_broker:
            if ids is None and current is not None and current.master_id is not None:
                return Outcome(invalid, f"Broker {req.broker_name} is still alive, clean up "
                               "failure")
            for broker_id in sorted(ids or ()):
                if alive(req.broker_name, broker_id):
                    return Outcome(invalid, f"Broker [{req.broker_name},  {broker_id}] is "
                                   "still alive, clean up failure")
        if current is None:
            return Outcome(invalid, f"Broker {req.broker_name} is not existed,clean broker "
                           "data failure.")
        return Outcome(events=(CleanBrokerData(req.broker_name, ids),))

    def sets_needing_election(self, alive: AlivePredicate) -> list[str]:
        """Sets whose master is not alive while another member is (5.3
        `scanNeedReelectBrokerSets`)."""
        return [name for name, s in sorted(self.sets.items())
                if s.master_id is not None and not alive(name, s.master_id)
                and any(alive(name, i) for i in s.members)]


def _sync_state_body(current: BrokerSet) -> bytes:
    return SyncStateSet(current.sync_state_set, current.sync_state_set_epoch).encode()

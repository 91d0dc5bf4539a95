"""The replica-info state machine and the election policy, without any IO."""

from __future__ import annotations

from engine.controller import events
from engine.controller.elect import LiveInfo, elect
from engine.controller.replicas import ReplicaState
from engine.protocol.body.controller import (
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    SyncStateSet,
)
from engine.protocol.codes import ResponseCode
from engine.protocol.fastjson import loads
from engine.protocol.header.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    RegisterBrokerToControllerRequestHeader,
)
from engine.protocol.wire import from_json

LIVE = LiveInfo()


def run(state: ReplicaState, outcome):  # type: ignore[no-untyped-def]
    for event in outcome.events:
        state.apply(events.decode(events.encode(event)))  # as a replayed log would
    return outcome


def join(state: ReplicaState, broker_id: int, alive: set[int]) -> None:
    next_id = state.next_broker_id(GetNextBrokerIdRequestHeader("c", "b")).header.next_broker_id
    assert next_id == broker_id
    addr = f"h:{broker_id}"
    assert run(state, state.apply_broker_id(
        ApplyBrokerIdRequestHeader("c", "b", broker_id, f"{addr};1"))).code == 0
    alive.add(broker_id)
    out = run(state, state.register_broker(
        RegisterBrokerToControllerRequestHeader("c", "b", broker_id, addr),
        lambda _n, i: i in alive))
    assert out.code == 0


def three_brokers() -> tuple[ReplicaState, set[int]]:
    state, alive = ReplicaState(), set[int]()
    join(state, 1, alive)
    out = run(state, state.elect_master(ElectMasterRequestHeader("c", "b", 1), lambda _n, i: LIVE,
                                        False))
    assert (out.code, out.header.master_broker_id, out.header.master_epoch) == (0, 1, 1)
    join(state, 2, alive)
    join(state, 3, alive)
    return state, alive


def test_ids_are_handed_out_in_order_and_kept_by_their_check_code():
    state, _ = three_brokers()
    again = state.apply_broker_id(ApplyBrokerIdRequestHeader("c", "b", 2, "h:2;1"))
    assert again.code == 0
    taken = state.apply_broker_id(ApplyBrokerIdRequestHeader("c", "b", 2, "h:9;5"))
    assert taken.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID
    first = ReplicaState().apply_broker_id(ApplyBrokerIdRequestHeader("c", "x", 2, "h;1"))
    assert first.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID


def test_register_answers_the_live_master_and_the_sync_state_set():
    state, alive = three_brokers()
    out = state.register_broker(RegisterBrokerToControllerRequestHeader("c", "b", 2, "h:2"),
                                lambda _n, i: i in alive)
    assert (out.header.master_broker_id, out.header.master_address) == (1, "h:1")
    assert SyncStateSet.decode(out.body, "x") == SyncStateSet(frozenset({1}), 1)
    alive.discard(1)
    out = state.register_broker(RegisterBrokerToControllerRequestHeader("c", "b", 2, "h:2b"),
                                lambda _n, i: i in alive)
    assert out.header.master_broker_id is None
    run(state, out)
    assert state.sets["b"].address(2) == "h:2b"


def test_alter_sync_state_set_checks_master_epochs_and_liveness():
    state, alive = three_brokers()

    def alter(ids: set[int], epoch: int = 1, master: int = 1, sse: int | None = None):  # type: ignore[no-untyped-def]
        current = state.sets["b"].sync_state_set_epoch if sse is None else sse
        return run(state, state.alter_sync_state_set(
            AlterSyncStateSetRequestHeader("b", master, epoch),
            SyncStateSet(frozenset(ids), current), lambda _n, i: i in alive))

    assert alter({1, 2}, master=2).code == ResponseCode.CONTROLLER_INVALID_MASTER
    assert alter({1, 2}, epoch=0).code == ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH
    assert alter({1, 2}, sse=0).code == ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
    assert alter({1, 7}).code == ResponseCode.CONTROLLER_INVALID_REPLICAS
    assert alter({2, 3}).code == ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    alive.discard(3)
    assert alter({1, 3}).code == ResponseCode.CONTROLLER_BROKER_NOT_ALIVE
    out = alter({1, 2})
    assert (out.code, out.header.new_sync_state_set_epoch) == (0, 2)
    assert state.sets["b"].sync_state_set == {1, 2}
    assert alter({1, 2}).code == ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED


def test_election_takes_the_live_in_sync_broker_with_the_longest_log():
    state, alive = three_brokers()
    run(state, state.alter_sync_state_set(AlterSyncStateSetRequestHeader("b", 1, 1),
                                          SyncStateSet(frozenset({1, 2, 3}), 1),
                                          lambda _n, i: i in alive))
    alive.discard(1)
    infos = {2: LiveInfo(1, 100, 0), 3: LiveInfo(1, 200, 5)}
    out = run(state, state.elect_master(ElectMasterRequestHeader(broker_name="b"),
                                        lambda _n, i: infos.get(i) if i in alive else None,
                                        False))
    assert (out.code, out.header.master_broker_id, out.header.master_epoch,
            out.header.sync_state_set_epoch) == (0, 3, 2, 3)
    body = from_json(ElectMasterResponseBody, loads(out.body))
    assert body.sync_state_set == {3} and body.broker_member_group.broker_addrs[2] == "h:2"
    assert state.sets["b"].sync_state_set == {3}
    again = state.elect_master(ElectMasterRequestHeader(broker_name="b"),
                               lambda _n, i: infos.get(i), False)
    assert again.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST


def test_unclean_election_is_off_by_default():
    state, alive = three_brokers()  # SyncStateSet {1}: slaves 2 and 3 never caught up
    alive.discard(1)

    def live(_n: str, i: int) -> LiveInfo | None:
        return LIVE if i in alive else None

    out = run(state, state.elect_master(ElectMasterRequestHeader(broker_name="b"), live, False))
    assert out.code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    assert state.sets["b"].master_id is None and state.sets["b"].master_epoch == 2
    out = state.elect_master(ElectMasterRequestHeader(broker_name="b"), live, True)
    assert out.code == 0 and out.header.master_broker_id in (2, 3)


def test_designated_election_picks_only_the_preferred_broker():
    state, alive = three_brokers()
    run(state, state.alter_sync_state_set(AlterSyncStateSetRequestHeader("b", 1, 1),
                                          SyncStateSet(frozenset({1, 2}), 1),
                                          lambda _n, i: i in alive))

    def live(_n: str, i: int) -> LiveInfo | None:
        return LIVE if i in alive else None

    bad = state.elect_master(ElectMasterRequestHeader("c", "b", 3, True), live, False)
    assert bad.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    out = run(state, state.elect_master(ElectMasterRequestHeader("c", "b", 2, True), live, False))
    assert (out.code, out.header.master_broker_id) == (0, 2)


def test_sync_state_data_lists_in_sync_and_behind_replicas():
    state, alive = three_brokers()
    alive.discard(3)
    out = state.sync_state_data(["b", "none"], lambda _n, i: i in alive)
    info = from_json(BrokerReplicasInfo, loads(out.body)).replicas_info_table
    assert list(info) == ["b"]
    assert [r.broker_id for r in info["b"].in_sync_replicas] == [1]
    assert [(r.broker_id, r.alive) for r in info["b"].not_in_sync_replicas] == [
        (2, True), (3, False)]


def test_clean_refuses_a_live_set_then_forgets_it():
    state, alive = three_brokers()
    refused = state.clean_broker_data(CleanControllerBrokerDataRequestHeader("b"),
                                      lambda _n, i: i in alive)
    assert refused.code == ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    out = run(state, state.clean_broker_data(
        CleanControllerBrokerDataRequestHeader("b", broker_controller_ids_to_clean="3",
                                               is_clean_living_broker=True),
        lambda _n, i: i in alive))
    assert out.code == 0 and 3 not in state.sets["b"].members
    run(state, state.clean_broker_data(
        CleanControllerBrokerDataRequestHeader("b", is_clean_living_broker=True),
        lambda _n, i: True))
    assert state.sets == {}


def test_sets_needing_election_have_a_dead_master_and_a_live_member():
    state, alive = three_brokers()
    assert state.sets_needing_election(lambda _n, i: i in alive) == []
    alive.discard(1)
    assert state.sets_needing_election(lambda _n, i: i in alive) == ["b"]
    assert state.sets_needing_election(lambda _n, i: False) == []


def test_policy_orders_by_epoch_offset_priority():
    infos = {1: LiveInfo(2, 10, 9), 2: LiveInfo(3, 5, 9), 3: LiveInfo(3, 5, 1)}
    assert elect({1, 2, 3}, None, None, None, infos.get) == 3
    assert elect({1, 2, 3}, None, 1, None, infos.get) == 1
    assert elect({9}, None, None, None, infos.get) is None
    assert elect({9}, {1, 2}, None, None, infos.get) == 2

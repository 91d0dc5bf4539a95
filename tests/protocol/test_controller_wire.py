"""The 5.3 controller's wire values: codes, headers and bodies as 5.3.3 writes and reads them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.protocol import fastjson
from engine.protocol.body.controller import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    EpochEntry,
    EpochEntryCache,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
    decode_broker_names,
    encode_broker_names,
)
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.errors import BodyError, HeaderError
from engine.protocol.header.controller import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseHeader,
    GetMetaDataResponseHeader,
    GetNextBrokerIdResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
)
from engine.protocol.wire import from_ext, from_json, to_ext, to_json


def test_request_codes_are_5_3_3s():
    codes = [RequestCode.BROKER_HEARTBEAT, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
            RequestCode.CONTROLLER_ELECT_MASTER, RequestCode.CONTROLLER_REGISTER_BROKER,
            RequestCode.CONTROLLER_GET_REPLICA_INFO, RequestCode.CONTROLLER_GET_METADATA_INFO,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, RequestCode.GET_BROKER_EPOCH_CACHE,
            RequestCode.NOTIFY_BROKER_ROLE_CHANGED, RequestCode.UPDATE_CONTROLLER_CONFIG,
            RequestCode.GET_CONTROLLER_CONFIG, RequestCode.CLEAN_BROKER_DATA,
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, RequestCode.CONTROLLER_APPLY_BROKER_ID,
            ]
    assert [int(c) for c in codes] == [904, *range(1001, 1014)]


def test_response_codes_are_5_3_3s():
    names = [c for c in ResponseCode if c.name.startswith("CONTROLLER_")]
    assert [int(c) for c in names] == list(range(2000, 2017))
    assert ResponseCode.CONTROLLER_NOT_LEADER == 2007
    assert ResponseCode.CONTROLLER_ELECT_MASTER_FAILED == 2012


def test_elect_master_header_uses_java_names_and_defaults():
    header = ElectMasterRequestHeader("c", "b", 2, True, 1_700_000_000_000)
    assert to_ext(header) == {"clusterName": "c", "brokerName": "b", "brokerId": "2",
                              "designateElect": "true", "invokeTime": "1700000000000"}
    assert from_ext(ElectMasterRequestHeader, {"brokerName": "b"}) == ElectMasterRequestHeader(
        broker_name="b")


def test_absent_master_fields_stay_absent():
    assert to_ext(RegisterBrokerToControllerResponseHeader("c", "b")) == {
        "clusterName": "c", "brokerName": "b"}
    assert to_ext(ElectMasterResponseHeader(1, "h:1", 3, 4)) == {
        "masterBrokerId": "1", "masterAddress": "h:1", "masterEpoch": "3",
        "syncStateSetEpoch": "4"}


def test_boolean_fields_keep_their_is_prefix():
    assert to_ext(GetMetaDataResponseHeader("g", "n0", "h:1", True, "n0:h:1;"))["isLeader"] == (
        "true")
    ext = to_ext(CleanControllerBrokerDataRequestHeader("b", None, "1;2", True, 5))
    assert ext == {"brokerName": "b", "brokerControllerIdsToClean": "1;2",
                   "isCleanLivingBroker": "true", "invokeTime": "5"}


def test_int_fields_refuse_out_of_range_values():
    with pytest.raises(HeaderError):
        from_ext(AlterSyncStateSetRequestHeader,
                 {"brokerName": "b", "masterBrokerId": "1", "masterEpoch": str(1 << 31)})
    with pytest.raises(HeaderError):
        from_ext(ApplyBrokerIdRequestHeader, {"clusterName": "c", "brokerName": "b",
                                              "registerCheckCode": "x"})


@pytest.mark.parametrize("header", [
    AlterSyncStateSetRequestHeader("b", 1, 2, 3),
    ApplyBrokerIdRequestHeader("c", "b", 2, "127.0.0.1:10911;1700000000000"),
    RegisterBrokerToControllerRequestHeader("c", "b", 2, "127.0.0.1:10911", 9),
    GetNextBrokerIdResponseHeader("c", "b", 4),
    BrokerHeartbeatRequestHeader("c", "127.0.0.1:10911", "b", 1, 3, 1024, 1000, 10_000, 0),
    BrokerHeartbeatRequestHeader("c", "127.0.0.1:10911", "b"),
])
def test_headers_round_trip(header: object):
    assert from_ext(type(header), to_ext(header)) == header


def test_sync_state_set_matches_java_json():
    body = SyncStateSet(frozenset({2, 1}), 3)
    assert body.encode() == b'{"syncStateSet":[1,2],"syncStateSetEpoch":3}'
    assert SyncStateSet.decode(b'{"syncStateSet":[1,2],"syncStateSetEpoch":3}', "x") == body
    with pytest.raises(BodyError):
        SyncStateSet.decode(None, "CONTROLLER_ALTER_SYNC_STATE_SET")


def test_elect_master_body_writes_member_addresses_with_numeric_keys():
    body = ElectMasterResponseBody(BrokerMemberGroup("c", "b", {1: "h:1", 2: "h:2"}),
                                   frozenset({1}))
    text = body.encode()
    assert b'"brokerAddrs":{1:"h:1",2:"h:2"}' in text
    assert from_json(ElectMasterResponseBody, fastjson.loads(text)) == body


def test_replicas_info_round_trips():
    info = BrokerReplicasInfo({"b": ReplicasInfo(
        1, "h:1", 2, 3, [ReplicaIdentity("b", 1, "h:1", True)],
        [ReplicaIdentity("b", 2, "h:2", False)])})
    assert from_json(BrokerReplicasInfo, fastjson.loads(info.encode())) == info
    assert b'"notInSyncReplicas":[{"alive":false' in info.encode()


def test_epoch_cache_round_trips():
    cache = EpochEntryCache("c", "b", 1, [EpochEntry(1, 0, 100), EpochEntry(2, 100)], 150)
    assert from_json(EpochEntryCache, fastjson.loads(cache.encode())) == cache


@given(st.lists(st.text(min_size=1, max_size=8), max_size=5))
def test_broker_name_lists_round_trip(names: list[str]):
    assert decode_broker_names(encode_broker_names(names)) == names


def test_broker_name_list_refuses_other_shapes():
    assert decode_broker_names(None) == []
    with pytest.raises(BodyError):
        decode_broker_names(b'{"a":1}')
    assert to_json(SyncStateSet()) == {"syncStateSet": [], "syncStateSetEpoch": 0}

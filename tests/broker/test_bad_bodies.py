"""Request bodies that are missing, `null`, not an object or wrongly typed: every handler that
decodes one answers SYSTEM_ERROR (as 4.9.7 does, there through a NullPointerException) with a
remark naming the request and the fault; nothing is stored and no traceback is logged."""

from __future__ import annotations

import logging
import zlib
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.signature import sign
from engine.protocol.version import V3_0_11
from engine.remoting.client import RemotingClient
from engine.remoting.router import RequestContext, Router
from engine.remoting.server import RemotingServer
from engine.store.config import BrokerRole
from tests.auth.conftest import APP, AUTH_ON, grant_app
from tests.broker.conftest import call, running_broker
from tests.broker.helpers import heartbeat
from tests.conftest import addr_of
from tests.ports import free_port

R = RequestCode

#: (request code, body, remark); every answer is SYSTEM_ERROR.
BROKER_CASES: list[tuple[int, bytes | None, str]] = [
    (R.HEART_BEAT, None,
     "HEART_BEAT: the request has no body; it needs a HeartbeatData JSON body"),
    (R.HEART_BEAT, b"null",
     "HEART_BEAT: the request body is null; it needs a HeartbeatData JSON body"),
    (R.HEART_BEAT, b'"c1"', "HEART_BEAT: the request body is a JSON string, not an object; "
                            "it needs a HeartbeatData JSON body"),
    (R.HEART_BEAT, b'{"clientID":"c1","consumerDataSet":[{"groupName":null}]}',
     "HeartbeatData.consumerDataSet.groupName: null where a str is expected "
     "(HEART_BEAT request body)"),
    (R.CHECK_CLIENT_CONFIG, None, "CHECK_CLIENT_CONFIG: the request has no body; "
                                  "it needs a CheckClientRequestBody JSON body"),
    (R.CHECK_CLIENT_CONFIG, b"null", "CHECK_CLIENT_CONFIG: the request body is null; "
                                     "it needs a CheckClientRequestBody JSON body"),
    (R.CHECK_CLIENT_CONFIG,
     b'{"subscriptionData":{"topic":"T","subString":"a > 1","expressionType":null}}',
     "CheckClientRequestBody.subscriptionData.expressionType: null where an ExpressionType "
     "is expected (CHECK_CLIENT_CONFIG request body)"),
    (R.LOCK_BATCH_MQ, None,
     "LOCK_BATCH_MQ: the request has no body; it needs a LockBatchRequestBody JSON body"),
    (R.LOCK_BATCH_MQ, b"null",
     "LOCK_BATCH_MQ: the request body is null; it needs a LockBatchRequestBody JSON body"),
    (R.LOCK_BATCH_MQ, b"[1]", "LOCK_BATCH_MQ: the request body is a JSON array, not an "
                              "object; it needs a LockBatchRequestBody JSON body"),
    (R.LOCK_BATCH_MQ, b'{"consumerGroup":"G","clientId":"c1","mqSet":5}',
     "LockBatchRequestBody.mqSet: expected a JSON array, got int (LOCK_BATCH_MQ request body)"),
    (R.UNLOCK_BATCH_MQ, None,
     "UNLOCK_BATCH_MQ: the request has no body; it needs an UnlockBatchRequestBody JSON body"),
    (R.UNLOCK_BATCH_MQ, b"null",
     "UNLOCK_BATCH_MQ: the request body is null; it needs an UnlockBatchRequestBody JSON body"),
    (R.UNLOCK_BATCH_MQ, b'{"consumerGroup":"G","mqSet":[null]}',
     "UnlockBatchRequestBody.mqSet: null item in a JSON array (UNLOCK_BATCH_MQ request body)"),
    (R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
     "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the request has no body; "
     "it needs a SubscriptionGroupConfig JSON body"),
    (R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, b"null",
     "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the request body is null; "
     "it needs a SubscriptionGroupConfig JSON body"),
    (R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, b"7",
     "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the request body is a JSON number, not an object; "
     "it needs a SubscriptionGroupConfig JSON body"),
    (R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, b'{"groupName":"G"',
     "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the request body is not JSON (invalid JSON at "
     "character 16: expected ',' or '}'); it needs a SubscriptionGroupConfig JSON body"),
    (R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, b'{"groupName":"G","retryQueueNums":"many"}',
     "SubscriptionGroupConfig.retryQueueNums: 'many' is not a valid long "
     "(UPDATE_AND_CREATE_SUBSCRIPTIONGROUP request body)"),
    (R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, b'{"groupName":null}',
     "SubscriptionGroupConfig.groupName: null where a str is expected "
     "(UPDATE_AND_CREATE_SUBSCRIPTIONGROUP request body)"),
    (R.AUTH_CREATE_USER, b"null",
     "AUTH_CREATE_USER: the request body is null; it needs a UserInfo JSON body"),
    (R.AUTH_UPDATE_ACL, None,
     "AUTH_UPDATE_ACL: the request has no body; it needs an AclInfo JSON body"),
]

AUTH_HEADERS = {R.AUTH_CREATE_USER: {"username": "u1"}, R.AUTH_UPDATE_ACL: {"subject": "User:u1"}}


async def _broker_tables(client: RemotingClient, addr: str) -> list[bytes | None]:
    """What a bad body could have created: topics (retry topics of groups) and groups."""
    out = []
    for code in (R.GET_ALL_TOPIC_CONFIG, R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG):
        resp = await call(client, addr, code)
        assert resp.code == ResponseCode.SUCCESS
        out.append(resp.body)
    return out


async def test_bad_bodies_get_a_clear_answer_and_change_nothing(
    broker: BrokerController, client: RemotingClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    before = await _broker_tables(client, broker.addr)
    for code, body, remark in BROKER_CASES:
        resp = await call(client, broker.addr, code, AUTH_HEADERS.get(code), body)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, remark), (code, body)
    assert await _broker_tables(client, broker.addr) == before
    st = broker.state
    assert st.consumers.get("G") is None
    assert st.access is not None and st.access.store.user("u1") is None
    ok = await client.invoke(broker.addr, heartbeat("c1", consumer_group="G"), timeout=10)
    assert ok.code == ResponseCode.SUCCESS
    assert caplog.records == []


async def test_a_oneway_bad_body_is_dropped_with_a_warning(
    broker: BrokerController, client: RemotingClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A oneway request with a bad body gets no answer; one warning line, no traceback."""
    caplog.set_level(logging.WARNING)
    for code, body, remark in BROKER_CASES:
        caplog.clear()
        await client.invoke_oneway(broker.addr, request(code, AUTH_HEADERS.get(code), body))
        ok = await call(client, broker.addr, R.GET_BROKER_RUNTIME_INFO)  # the oneway was read
        assert ok.code == ResponseCode.SUCCESS
        assert [(r.levelno, remark in r.getMessage()) for r in caplog.records] == [
            (logging.WARNING, True)], (code, body)


BROKER_ADDR = "127.0.0.1:10911"


def _register(body: bytes | None, *, compressed: bool = False,
              version: int | None = None) -> RemotingCommand:
    ext = {"brokerName": "broker-bad", "brokerAddr": BROKER_ADDR, "clusterName": "C",
           "haServerAddr": "127.0.0.1:10912", "brokerId": "0",
           "compressed": "true" if compressed else "false", "bodyCrc32": "0"}
    if version is None:
        return request(R.REGISTER_BROKER, ext, body)
    return request(R.REGISTER_BROKER, ext, body, version=version)


def _query(body: bytes | None) -> RemotingCommand:
    ext = {"brokerName": "broker-bad", "brokerAddr": BROKER_ADDR, "clusterName": "C",
           "brokerId": "0"}
    return request(R.QUERY_DATA_VERSION, ext, body)


NAMESRV_CASES: list[tuple[RemotingCommand, str]] = [
    (_register(b"null"),
     "REGISTER_BROKER: the request body is null; it needs a RegisterBrokerBody JSON body"),
    (_register(b"[]"), "REGISTER_BROKER: the request body is a JSON array, not an object; "
                       "it needs a RegisterBrokerBody JSON body"),
    (_register(b'{"topicConfigSerializeWrapper":null}'),
     "RegisterBrokerBody.topicConfigSerializeWrapper: null where an object for "
     "TopicConfigSerializeWrapper is expected (REGISTER_BROKER request body)"),
    (_register(b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":null}}}'),
     "RegisterBrokerBody.topicConfigSerializeWrapper.topicConfigTable: null where an object "
     "for TopicConfig is expected (REGISTER_BROKER request body)"),
    (_register(zlib.compress(b"\0\0\0\x04null\0\0\0\0"), compressed=True),
     "REGISTER_BROKER: the compressed RegisterBrokerBody does not decode: "
     "its DataVersion is not a JSON object"),
    (_register(zlib.compress(b"\0\0\0\x02{}\0\0\0\x01\0\0\0\x02\xff\xfe"), compressed=True),
     "REGISTER_BROKER: the compressed RegisterBrokerBody does not decode: "
     "a topic config is not UTF-8 text"),
    (_register(zlib.compress(b"\0\0\0\x02{}\0\0\0\0\0\0\0\x015"), compressed=True),
     "REGISTER_BROKER: the compressed RegisterBrokerBody does not decode: "
     "its filter server list is not a JSON array"),
    (_register(b"null", version=V3_0_11 - 1),
     "REGISTER_BROKER: the request body is null; it needs a TopicConfigSerializeWrapper JSON "
     "body"),
    (_query(None),
     "QUERY_DATA_VERSION: the request has no body; it needs a DataVersion JSON body"),
    (_query(b"null"),
     "QUERY_DATA_VERSION: the request body is null; it needs a DataVersion JSON body"),
    (_query(b'{"timestamp":1,"counter":"x"}'),
     "DataVersion.counter: 'x' is not a valid long (QUERY_DATA_VERSION request body)"),
]


async def test_bad_bodies_to_the_name_server(
    broker: BrokerController, namesrv: NamesrvController, client: RemotingClient,
    caplog: pytest.LogCaptureFixture
) -> None:
    """`broker` has registered: a bad registration or query leaves its routes as they were."""
    caplog.set_level(logging.ERROR)
    ns = addr_of(namesrv)
    before = await call(client, ns, R.GET_BROKER_CLUSTER_INFO)
    assert before.code == ResponseCode.SUCCESS and b"broker-a" in (before.body or b"")
    for cmd, remark in NAMESRV_CASES:
        resp = await client.invoke(ns, cmd, timeout=10)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, remark), cmd
    after = await call(client, ns, R.GET_BROKER_CLUSTER_INFO)
    assert after.body == before.body
    assert BROKER_ADDR not in namesrv.state.routes.live
    ok = await client.invoke(ns, _register(None), timeout=10)  # no body: an empty table
    assert ok.code == ResponseCode.SUCCESS
    assert caplog.records == []


MASTER_TABLES = (R.GET_ALL_TOPIC_CONFIG, R.GET_ALL_CONSUMER_OFFSET, R.GET_ALL_DELAY_OFFSET,
                 R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, R.GET_BROKER_HA_STATUS)


@pytest.mark.parametrize("answer", [None, b"null", b"[]"], ids=["missing", "null", "array"])
async def test_a_slave_keeps_its_tables_when_the_master_answers_a_bad_body(
    tmp_path: Path, namesrv: NamesrvController, caplog: pytest.LogCaptureFixture,
    answer: bytes | None
) -> None:
    """A master answering SUCCESS with no table (Java's never does): before, a missing body
    read as an empty table wiped the slave's topics and their consume queues, and `null`
    stopped the sync with AttributeError.  Now each step is a warning and nothing changes."""
    master_router = Router()

    @master_router.handles(*MASTER_TABLES)
    def table(ctx: RequestContext[None], cmd: RemotingCommand) -> RemotingCommand:
        return cmd.response(body=answer)

    # The master's normal port and its fast port (port - 2, where a slave asks for the topic
    # table first): with port 0 the fast port could be another test's server.
    port = free_port(neighbours=(-2,))
    master = RemotingServer(master_router, None, host="127.0.0.1", port=port)
    fast = RemotingServer(master_router, None, host="127.0.0.1", port=port - 2)
    await master.start()
    await fast.start()
    try:
        async with running_broker(tmp_path, namesrv, broker_id=1, broker_role=BrokerRole.SLAVE,
                                  slave_sync_interval=600_000) as slave:
            st = slave.state
            st.topics.create_if_absent("TKept", 4, 6, 0)
            before = (dict(st.topics.table), st.topics.data_version,
                      st.groups.wrapper(), dict(st.schedule.offsets))
            caplog.set_level(logging.WARNING)
            await slave.roles.sync.sync_all(f"127.0.0.1:{master.port}")
            assert (dict(st.topics.table), st.topics.data_version,
                    st.groups.wrapper(), dict(st.schedule.offsets)) == before
            warned = [r.getMessage() for r in caplog.records
                      if r.name == "engine.broker.slave_sync"]
            assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
            for code in MASTER_TABLES:
                assert any(f"{code.name}: the answer " in w for w in warned), (code, warned)
    finally:
        await fast.stop()
        await master.stop()


async def test_with_access_control_a_null_body_is_refused_and_the_connection_kept(
    tmp_path: Path, namesrv: NamesrvController, client: RemotingClient,
    caplog: pytest.LogCaptureFixture
) -> None:
    """The access check reads the same bodies before the handler.  Before: a null heartbeat
    body failed it with AttributeError out of the connection's reader (a fatal traceback, the
    connection closed with its other calls); now it is refused like any unreadable body."""
    caplog.set_level(logging.ERROR)
    async with running_broker(tmp_path, namesrv, **AUTH_ON) as broker:
        await grant_app(client, broker.addr)
        resp = await client.invoke(broker.addr, sign(request(R.HEART_BEAT, None, b"null"), APP),
                                   timeout=10)
        assert (resp.code, resp.remark) == (
            ResponseCode.NO_PERMISSION, "HEART_BEAT (34): cannot tell what the request touches: "
            "HeartbeatData: null where an object for HeartbeatData is expected")
        ok = await client.invoke(broker.addr, sign(heartbeat("c1", consumer_group="app-group"),
                                                   APP), timeout=10)
        assert ok.code == ResponseCode.SUCCESS, ok.remark
    assert caplog.records == []

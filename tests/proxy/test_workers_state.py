"""What follows a client across proxy workers (workers.py): each client listed once with its
own address, an orphaned transaction checked through the worker holding the client's stream,
consumerStatus / consumeMessageDirectly relayed to a client on either worker, an ACL change
seen by every worker."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from engine.auth.model import (
    Acl,
    Action,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    User,
    UserType,
)
from engine.client.admin.broker import BrokerAdmin
from engine.namesrv.controller import NamesrvController
from engine.protocol.body.admin import CMResult
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient
from mqadmin.operations import consumer as ops
from mqadmin.operations.messages.redeliver import consume_directly
from tests.proxy.conftest import in_thread, stored
from tests.proxy.official import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Signature,
    SimpleConsumer,
    TransactionResolution,
)
from tests.proxy.sockets import client_ports
from tests.proxy.test_producer import _Answer, message, started
from tests.proxy.test_relay import (
    GROUP,
    STACK_TEXT,
    TOPIC,
    RawConsumer,
    headers,
    operator,
    stored_message,
)
from tests.proxy.workers import channel_on_each_worker, connected, running_workers

POLL_S = 0.1
#: How long a rule change may take to reach a worker: its reload interval and then some.
RELOAD_WAIT_S = 30


def route_call(stub: service_pb2_grpc.MessagingServiceStub) -> object:
    return stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=TOPIC)),
                           metadata=headers("route-probe"), timeout=10)


async def test_each_client_is_listed_once_with_its_own_address(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    async with running_workers(tmp_path, namesrv, topics={"Listed": None}) as w:
        config = ClientConfiguration(w.endpoint, Credentials())
        consumers: list[tuple[SimpleConsumer, int]] = []
        client = RemotingClient()
        try:
            for _ in range(12):
                consumers.append(await connected(w, lambda: SimpleConsumer(
                    config, "ListedGroup", {"Listed": FilterExpression("*")})))
                if len({i for _, i in consumers}) == 2:
                    break
            assert len({i for _, i in consumers}) == 2
            for c, _ in consumers:
                assert await in_thread(c._init_settings_event.wait, 10)
            conns = await BrokerAdmin(client).consumer_connections(w.broker.addr,
                                                                  "ListedGroup")
            listed = [c.client_id for c in conns.connection_set]
            assert sorted(listed) == sorted(c.client_id for c, _ in consumers)  # once each
            # Each with the address of its own connection (this process's), not a worker's.
            mine = {f"127.0.0.1:{port}" for port in client_ports(os.getpid(), w.proxy.port)}
            assert {c.client_addr for c in conns.connection_set} <= mine
            assert {c.protocol for c in conns.connection_set} == {"gRPC"}
        finally:
            await client.close()
            for c, _ in consumers:
                await in_thread(c.shutdown)


async def test_an_orphaned_transaction_is_checked_through_the_worker_of_its_stream(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    async with running_workers(tmp_path, namesrv, topics={"Orphan": "TRANSACTION"},
                               transaction_time_out=0, transaction_check_interval=200) as w:
        checker = _Answer(TransactionResolution.COMMIT)
        producer = await started(w, "Orphan", checker=checker)  # type: ignore[arg-type]
        try:
            transaction = await in_thread(producer.begin_transaction)
            receipt = await in_thread(producer.send, message("Orphan", b"decide later"),
                                      transaction)
            record = await stored(w, "Orphan", receipt.message_id,  # type: ignore[arg-type]
                                  timeout=30)
        finally:
            await in_thread(producer.shutdown)
    assert record.body == b"decide later"
    assert receipt.message_id in checker.message_ids


async def test_consumer_status_and_consume_directly_reach_a_client_on_either_worker(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    async with running_workers(tmp_path, namesrv, topics={TOPIC: None}) as w, \
            channel_on_each_worker(w, route_call) as stubs, operator(namesrv) as admin:
        found = await stored_message(w, admin)  # type: ignore[arg-type]
        for index, stub in enumerate(stubs):
            client_id = f"go-client-on-worker-{index}"
            raw = RawConsumer(stub, client_id)
            await raw.start()
            try:
                _, info = await ops.client_status(admin, GROUP, client_id, jstack=True)
                assert info.jstack == STACK_TEXT
                direct = await consume_directly(admin, GROUP, client_id, found)
                assert direct.result.consume_result is CMResult.CR_SUCCESS
            finally:
                await raw.close()


async def test_an_acl_change_is_seen_by_every_worker(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    async with running_workers(
            tmp_path, namesrv, topics={"Secure": None}, authentication_enabled=True,
            authorization_enabled=True,
            init_authentication_user=json.dumps({"username": "admin", "password": "pw"}),
            inner_client_authentication_credentials=json.dumps(
                {"accessKey": "inner", "secretKey": "inner-secret"})) as w:
        w.broker.access.store.create_user(User("alice", "alice-secret", UserType.NORMAL))
        metadata = Signature.metadata(
            ClientConfiguration(w.endpoint, Credentials("alice", "alice-secret")), "alice-1")

        async def route(stub: service_pb2_grpc.MessagingServiceStub) -> int:
            answer = await stub.QueryRoute(spb.QueryRouteRequest(
                topic=pb.Resource(name="Secure")), metadata=metadata, timeout=10)
            return int(answer.status.code)

        async with channel_on_each_worker(w, route) as stubs:
            for stub in stubs:  # the user reached every worker; no rule grants her yet
                for _ in range(int(RELOAD_WAIT_S / POLL_S)):
                    if await route(stub) == pb.UNAUTHORIZED:
                        break
                    await asyncio.sleep(POLL_S)
                assert await route(stub) == pb.UNAUTHORIZED
            w.broker.access.store.put_acl(Acl("User:alice", (Policy(PolicyType.CUSTOM, (
                PolicyEntry(Resource.parse("Topic:Secure"), (Action.PUB,)),)),)))
            for stub in stubs:  # each worker reloads the rules on its own
                for _ in range(int(RELOAD_WAIT_S / POLL_S)):
                    if await route(stub) == pb.OK:
                        break
                    await asyncio.sleep(POLL_S)
                assert await route(stub) == pb.OK

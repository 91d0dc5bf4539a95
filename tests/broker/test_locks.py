"""Queue locks for orderly consumption (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ)."""

from __future__ import annotations

import json

from engine.broker.controller import BrokerController
from engine.broker.locks import RebalanceLockManager
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.codes import RequestCode
from engine.remoting.client import RemotingClient

from .conftest import call

Q0, Q1 = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)


def test_lock_rules() -> None:
    now = [0]
    locks = RebalanceLockManager(lambda: now[0])
    assert locks.try_lock_batch("G", [Q0, Q1], "c1") == {Q0, Q1}
    assert locks.try_lock_batch("G", [Q0, Q1], "c2") == set()
    now[0] = 30_000
    assert locks.try_lock_batch("G", [Q0], "c1") == {Q0}  # renewed
    now[0] = 61_000
    assert locks.try_lock_batch("G", [Q0, Q1], "c2") == {Q1}  # Q1 expired, Q0 was renewed
    locks.unlock_batch("G", [Q0], "c2")  # not c2's lock: no effect
    assert locks.is_locked("G", Q0, "c1")
    locks.unlock_batch("G", [Q0], "c1")
    assert locks.try_lock_batch("G", [Q0], "c2") == {Q0}


async def test_lock_over_the_wire(broker: BrokerController, client: RemotingClient) -> None:
    mq = {"brokerName": "broker-a", "queueId": 0, "topic": "T"}
    body = json.dumps({"consumerGroup": "G", "clientId": "c1", "mqSet": [mq]}).encode()
    resp = await call(client, broker.addr, RequestCode.LOCK_BATCH_MQ, None, body)
    assert json.loads(resp.body or b"{}") == {"lockOKMQSet": [mq]}
    other = body.replace(b'"c1"', b'"c2"')
    resp = await call(client, broker.addr, RequestCode.LOCK_BATCH_MQ, None, other)
    assert json.loads(resp.body or b"{}") == {"lockOKMQSet": []}
    await call(client, broker.addr, RequestCode.UNLOCK_BATCH_MQ, None, body)
    resp = await call(client, broker.addr, RequestCode.LOCK_BATCH_MQ, None, other)
    assert json.loads(resp.body or b"{}") == {"lockOKMQSet": [mq]}

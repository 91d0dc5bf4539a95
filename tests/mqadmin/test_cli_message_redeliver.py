"""Delivering a stored message again on a live cluster, to real push consumers:
consumeMessageDirectly (one online client consumes it, its answer shown) and resendMessage
(a copy in the group's retry topic, consumed by that group only); both planned, confirmed and
audited by the change runner."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from engine.client import (
    ClientConfig,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumerOptions,
    MessageExt,
    PushConsumer,
)
from engine.protocol.message import PROPERTY_ORIGIN_MESSAGE_ID
from mqadmin import history
from mqadmin.exit_codes import ExitCode

from .cli import invoke, json_rows, rows_of_any
from .conftest import BackgroundCluster
from .dlq_helpers import setup_group


class Listener:
    """A push consumer's listener that records what it got (on the cluster's loop) and
    refuses (RECONSUME_LATER) bodies starting with b"refuse"."""

    def __init__(self) -> None:
        self.messages: list[MessageExt] = []
        self.changed = asyncio.Event()

    def __call__(self, msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                 ) -> ConsumeConcurrentlyStatus:
        self.messages += msgs
        self.changed.set()
        if any(m.body.startswith(b"refuse") for m in msgs):
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def wait(self, enough: Callable[[list[MessageExt]], bool], timeout: float = 20
                   ) -> None:
        async def until() -> None:
            while not enough(self.messages):
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(until(), timeout)


def online(cluster: BackgroundCluster, group: str, topic: str) -> tuple[PushConsumer, Listener]:
    listener = Listener()

    async def start() -> PushConsumer:
        config = ClientConfig(namesrv_addr=cluster.ns, instance_name=f"{group}-test",
                              rebalance_interval=500)
        consumer = PushConsumer(group, config, options=ConsumerOptions(
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET))
        consumer.subscribe(topic, "*")
        consumer.register_concurrently(listener)
        await consumer.start()
        return consumer
    return cluster.call(start()), listener


def test_consume_message_directly_reaches_a_live_consumer(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=1)
    cluster.create_topic("Other", queues=1)
    cluster.create_group("g1")
    sent = cluster.send("Orders", b"again please", keys="order-9")
    refused = cluster.send("Orders", b"refuse me")
    consumer, got = online(cluster, "g1", "Other")  # never pulls Orders itself
    try:
        client_id = consumer.instance.client_id
        args = ("-g", "g1", "-d", client_id, "-n", cluster.ns)
        unasked = invoke("consumeMessageDirectly", "-i", sent.msg_id, *args)
        assert unasked.exit_code == ExitCode.USAGE and "--yes" in unasked.stderr
        plan = json_rows("consumeMessageDirectly", "-i", sent.msg_id, "--dry-run", *args)
        assert plan == [{"msgId": sent.msg_id, "offsetMsgId": sent.offset_msg_id,
                         "topic": "Orders", "group": "g1", "clientId": client_id,
                         "clientAddr": plan[0]["clientAddr"]}]
        assert got.messages == [] and history.records() == []

        [row] = json_rows("consumeMessageDirectly", "-i", sent.msg_id, "--yes", *args)
        assert (row["clientId"], row["consumeResult"], row["autoCommit"]) == (
            client_id, "CR_SUCCESS", True)
        [again] = got.messages
        assert (again.body, again.keys, again.topic) == (b"again please", ("order-9",),
                                                         "Orders")
        [record] = history.records(detail=True)
        assert (record["command"], record["outcome"], record["target"]) == (
            "consumeMessageDirectly", "applied", sent.msg_id)
        assert record["result"][0]["consumeResult"] == "CR_SUCCESS"
        assert record["plan"][0]["clientId"] == client_id

        later = invoke("consumeMessageDirectly", "-i", refused.offset_msg_id, "--yes", *args,
                       "-o", "json")
        assert later.exit_code == ExitCode.REJECTED, later.stderr
        assert rows_of_any(later)[0]["consumeResult"] == "CR_LATER"
        assert "answered CR_LATER" in later.stderr
        assert history.records()[-1]["outcome"] == "failed"

        nobody = invoke("consumeMessageDirectly", "-i", sent.msg_id, "--yes", "-g", "g1",
                        "-d", "10.0.0.1@nobody", "-n", cluster.ns)
        assert nobody.exit_code == ExitCode.NOT_FOUND
        assert client_id in nobody.stderr and "consumerConnection" in nobody.stderr
        no_msg = invoke("consumeMessageDirectly", "-i", sent.msg_id[:-4] + "FFFF", "--yes",
                        *args)
        assert no_msg.exit_code == ExitCode.NOT_FOUND and "UNIQ_KEY" in no_msg.stderr
    finally:
        cluster.call(consumer.shutdown())


def test_resend_message_to_a_group(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=1)
    cluster.create_group("Billing")
    cluster.create_group("Audit")
    billing, billed = online(cluster, "Billing", "Orders")
    audit, audited = online(cluster, "Audit", "Orders")
    try:
        sent = cluster.send("Orders", b"invoice 1", tags="TagA", keys="inv-1")
        cluster.call(billed.wait(lambda ms: len(ms) == 1))
        cluster.call(audited.wait(lambda ms: len(ms) == 1))
        args = ("-g", "Billing", "-n", cluster.ns)
        plan = json_rows("resendMessage", "-i", sent.msg_id, "--dry-run", *args)
        assert plan == [{"msgId": sent.msg_id, "offsetMsgId": sent.offset_msg_id,
                         "topic": "Orders", "group": "Billing", "target": "%RETRY%Billing",
                         "consumersOnline": 1, "note": None}]

        [row] = json_rows("resendMessage", "-i", sent.offset_msg_id, "--yes", *args)
        assert (row["sendResult"], row["verified"]) == ("SEND_OK", True)
        assert row["msgId"] != sent.msg_id
        cluster.call(billed.wait(lambda ms: len(ms) == 2))
        _, copy = billed.messages
        assert (copy.topic, copy.body, copy.tags, copy.keys) == (
            "Orders", b"invoice 1", "TagA", ("inv-1",))  # the listener sees the original topic
        assert copy.properties[PROPERTY_ORIGIN_MESSAGE_ID] == sent.msg_id
        assert len(audited.messages) == 1  # the other group never gets the copy

        [record] = history.records(detail=True)
        assert (record["command"], record["outcome"], record["target"]) == (
            "resendMessage", "applied", sent.offset_msg_id)
        assert record["result"][0]["msgId"] == row["msgId"]
        [stored] = json_rows("queryMsgById", "-i", row["msgId"], "-t", "%RETRY%Billing",
                             "-n", cluster.ns)
        assert stored["properties"]["RETRY_TOPIC"] == "Orders"

        never = invoke("resendMessage", "-i", sent.msg_id, "-g", "NeverOnline", "--yes",
                       "-n", cluster.ns)
        assert never.exit_code == ExitCode.NOT_FOUND and "%RETRY%NeverOnline" in never.stderr
        assert len(history.records()) == 1
    finally:
        cluster.call(billing.shutdown())
        cluster.call(audit.shutdown())


def test_resend_to_a_group_with_no_consumer_online(cluster: BackgroundCluster) -> None:
    setup_group(cluster, "Idle", "Orders", queues=1)  # its retry topic, no consumer
    sent = cluster.send("Orders", b"for later", keys="k-1")
    args = ("-i", sent.msg_id, "-g", "Idle", "-n", cluster.ns)
    [plan] = json_rows("resendMessage", *args, "--dry-run")
    assert (plan["consumersOnline"], plan["note"]) == (
        0, "no consumer of Idle is online: the copy waits in its retry topic")
    [row] = json_rows("resendMessage", *args, "--yes")
    assert row["verified"] is True
    [waiting] = json_rows("printMsg", "-t", "%RETRY%Idle", "-n", cluster.ns)
    assert (waiting["msgId"], waiting["body"], waiting["keys"]) == (
        row["msgId"], "for later", "k-1")
    [record] = history.records(detail=True)
    assert record["plan"][0]["note"] == plan["note"]

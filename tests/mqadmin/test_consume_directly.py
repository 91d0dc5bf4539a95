"""CONSUME_MESSAGE_DIRECTLY (309) end to end: `queryMsgById -g -d` through the broker to an
engine.client push consumer, whose listener consumes the message again."""

from __future__ import annotations

from tests.mqadmin.cli import json_rows
from tests.mqadmin.conftest import BackgroundCluster
from tests.mqadmin.dlq_helpers import consume, stop


def test_broker_relays_to_the_named_push_consumer(cluster: BackgroundCluster) -> None:
    cluster.create_topic("Orders", queues=1)
    cluster.create_topic("Other", queues=1)
    cluster.create_group("g1")
    sent = cluster.send("Orders", b"again please", keys="order-9")
    consumer, received = consume(cluster, "g1", "Other")  # never pulls Orders itself
    try:
        client_id = consumer.instance.client_id
        [row] = json_rows("queryMsgById", "-n", cluster.ns, "-i", sent.offset_msg_id,
                          "-g", "g1", "-d", client_id)
        assert (row["clientId"], row["consumeResult"]) == (client_id, "CR_SUCCESS")
        [again] = received.messages
        assert (again.body, again.keys, again.topic) == (b"again please", ("order-9",),
                                                         "Orders")
    finally:
        stop(cluster, consumer)

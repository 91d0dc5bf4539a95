"""Pure pieces of mqadmin: allocation, times, ids, commit-log planning, vertical output,
a cluster's identity, the dead-letter ledger's scope, a group's progress rows."""

from __future__ import annotations

import datetime as dt
import io
import time

import pytest

from engine.protocol.body.admin import (
    Connection,
    ConsumerConnection,
    ConsumerRunningInfo,
    ProcessQueueInfo,
)
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.codes import LanguageCode
from mqadmin.config import Endpoint
from mqadmin.exit_codes import UsageProblem
from mqadmin.operations.consumer import (
    GroupClients,
    GroupProgress,
    QueueProgress,
    allocate_averagely,
    progress_rows,
)
from mqadmin.operations.dlq.ledger import ledger_of
from mqadmin.operations.store import CommitLog, Segment, human
from mqadmin.operations.targets import consumer_groups
from mqadmin.operations.times import format_time, parse_timestamp
from mqadmin.render import OutputFormat, render


def queues(n: int) -> list[MessageQueue]:
    return [MessageQueue("T", "b", i) for i in range(n)]


@pytest.mark.parametrize(("mqs", "cids", "expected"), [
    (5, 2, {"a": [0, 1, 2], "b": [3, 4]}),
    (2, 3, {"a": [0], "b": [1], "c": []}),
    (6, 3, {"a": [0, 1], "b": [2, 3], "c": [4, 5]}),
    (7, 3, {"a": [0, 1, 2], "b": [3, 4], "c": [5, 6]}),
])
def test_allocate_averagely_as_java(mqs: int, cids: int, expected: dict[str, list[int]]) -> None:
    cid_all = ["a", "b", "c"][:cids]
    got = {c: [mq.queue_id for mq in allocate_averagely(queues(mqs), cid_all, c)]
           for c in cid_all}
    assert got == expected
    assert allocate_averagely(queues(3), cid_all, "zz") == []


def test_parse_timestamp_forms() -> None:
    assert parse_timestamp("1700000000123") == 1700000000123
    local = dt.datetime(2024, 5, 1, 12, 30, 5, 250_000)
    assert parse_timestamp("2024-05-01#12:30:05:250") == int(local.timestamp() * 1000)
    assert parse_timestamp("2024-05-01T12:30:05.250") == int(local.timestamp() * 1000)
    assert parse_timestamp("1970-01-01T00:00:01+00:00") == 1000
    assert abs(parse_timestamp("now") - time.time() * 1000) < 5000
    with pytest.raises(UsageProblem):
        parse_timestamp("last tuesday")
    assert format_time(0) is None
    assert format_time(int(local.timestamp() * 1000)) == "2024-05-01 12:30:05.250"


def test_commit_log_plan_stops_at_the_first_unexpired_segment() -> None:
    seg = 100
    log = CommitLog(0, 450, seg, 1, [
        Segment("0", 0, 100, 1, True), Segment("100", 100, 200, 2, True),
        Segment("200", 200, 300, 3, False), Segment("300", 300, 400, 4, True),
        Segment("400", 400, 450, None, False)])
    assert [s.name for s in log.doomed] == ["0", "100"]
    assert log.new_min == 200
    assert "2 segment(s) go: offsets 0..200 (200 B)" in log.promise()
    last_only = CommitLog(0, 50, seg, 1, [Segment("0", 0, 50, None, True)])
    assert last_only.doomed == [] and "nothing expired" in last_only.promise()
    assert human(3 * 1024 * 1024) == "3.0 MiB"


def test_vertical_output_and_nested_values() -> None:
    out = io.StringIO()
    render([{"a": 1, "long_name": {"k": "v"}}, {"a": 2, "long_name": "x\ny"}],
           OutputFormat.TABLE, stream=out, vertical=True)
    assert out.getvalue() == ('a          1\nlong_name  {"k": "v"}\n\n'
                              "a          2\nlong_name  x\n           y\n")
    as_csv = io.StringIO()
    render([{"p": {"k": "v"}}], OutputFormat.CSV, stream=as_csv)
    assert as_csv.getvalue() == 'p\n"{""k"": ""v""}"\n'


def test_a_cluster_is_known_by_its_context_to_the_lag_monitor_and_by_its_addrs_to_the_ledger(
) -> None:
    saved = Endpoint(["10.0.0.2:9876", "10.0.0.1:9876"], "prod")
    assert saved.cluster_key == "prod"
    assert saved.lag_keys == ["prod", "10.0.0.2:9876;10.0.0.1:9876"]
    assert saved.ledger_scope == "10.0.0.1:9876;10.0.0.2:9876"
    plain = Endpoint(["10.0.0.1:9876"])
    assert plain.cluster_key == plain.text == "10.0.0.1:9876"
    assert plain.lag_keys == ["10.0.0.1:9876"]


def test_progress_rows_from_one_read_of_a_group() -> None:
    q0, q1 = MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)
    conn = Connection("10.0.0.5@1", "10.0.0.5:50000", LanguageCode.JAVA, 0)
    clients = GroupClients(ConsumerConnection(frozenset([conn])),
                           {conn.client_id: ConsumerRunningInfo(mq_table={
                               q0: ProcessQueueInfo()})})
    progress = GroupProgress("G", (QueueProgress(q0, 5, 2, 1_000, 9_000),
                                   QueueProgress(q1, 3, 3, 2_000, None)), 1.5, clients, 10_000)
    first, second, total = progress_rows(progress)
    assert (first["clientIP"], first["diff"], first["lagMs"]) == ("10.0.0.5", 3, 1_000)
    assert (second["clientIP"], second["diff"], second["lagMs"]) == ("NA", 0, 0)
    assert (total["topic"], total["diff"], total["lagMs"]) == ("(total)", 3, 1_000)
    assert total["oldestUnconsumed"] == first["oldestUnconsumed"] == format_time(9_000)
    assert progress.topics == ["T"]


def test_a_cluster_has_one_ledger_whatever_the_order_or_context_of_its_name_servers() -> None:
    named = ledger_of(Endpoint(["10.0.0.2:9876", "10.0.0.1:9876"], context="prod"))
    plain = ledger_of(Endpoint(["10.0.0.1:9876", "10.0.0.2:9876"]))
    assert named.scope == plain.scope == "10.0.0.1:9876;10.0.0.2:9876"


def test_pop_retry_topics_name_their_group_not_one_of_their_own() -> None:
    topics = ["T", "%RETRY%G", "%RETRY%G_T", "%RETRY%H+T", "%RETRY%a_b", "%DLQ%G", "X_T",
              "%RETRY%X_T"]
    # %RETRY%X_T is a group's own retry topic: there is no group X beside it.
    assert consumer_groups(topics) == ["G", "H", "X_T", "a_b"]


def test_a_pop_queue_shows_what_is_in_flight() -> None:
    q = QueueProgress(MessageQueue("T", "b", 0), 10, 4, 0, 1_000, in_flight=3)
    rows = progress_rows(GroupProgress("G", (q,), 0.0, GroupClients(None), 2_000))
    assert (rows[0]["diff"], rows[0]["inflight"], rows[-1]["inflight"]) == (6, 3, 3)


def test_a_client_is_told_grpc_by_its_proxy_or_by_its_5x_client_id() -> None:
    from engine.protocol.body.admin import Connection
    from mqadmin.operations.consumer import protocol_of
    said = Connection("10.0.0.5@1", "10.0.0.5:1", LanguageCode.PYTHON, 0, "gRPC")
    apache = Connection("host@12@0@1a2b3c", "10.0.0.6:2", LanguageCode.JAVA, 0)
    remoting = Connection("10.0.0.7@12#4711", "10.0.0.7:3", LanguageCode.JAVA, 0)
    assert [protocol_of(c) for c in (said, apache, remoting)] == ["gRPC", "gRPC", "remoting"]


def test_the_groups_screen_says_how_a_group_consumes() -> None:
    from engine.protocol.body.admin import Connection, ConsumerConnection
    from engine.protocol.body.heartbeat import ConsumeType
    from mqadmin.tui.data.groups import consumer_kind
    grpc = Connection("host@1@0@abc", "10.0.0.5:1", LanguageCode.PYTHON, 0, "gRPC")
    remoting = Connection("10.0.0.7@12", "10.0.0.7:3", LanguageCode.JAVA, 0)
    pop = ConsumerConnection(frozenset([remoting]), consume_type=ConsumeType.CONSUME_POP)
    both = ConsumerConnection(frozenset([grpc, remoting]),
                              consume_type=ConsumeType.CONSUME_PASSIVELY)
    assert [consumer_kind(pop), consumer_kind(both)] == ["POP · remoting",
                                                         "PUSH · gRPC + remoting"]

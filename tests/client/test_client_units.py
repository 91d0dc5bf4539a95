"""Client pieces without a broker: ids, request headers, compression, batches, caches, files."""

from __future__ import annotations

import datetime
import zlib
from pathlib import Path

import pytest

from engine.client.consume.local_offset_store import LocalFileOffsetStore
from engine.client.consume.offset_store import ReadOffsetType
from engine.client.consume.process_queue import ProcessQueue
from engine.client.core.client_config import ClientConfig
from engine.client.core.errors import MessageValidationError
from engine.client.core.ids import UniqIdGenerator
from engine.client.core.message import Message, MessageExt
from engine.client.core.pull_codec import pull_request, pull_result, pull_sys_flag
from engine.client.core.results import PullStatus
from engine.client.core.send_codec import prepare_message, send_ext, single_request
from engine.client.produce.batch import chunks
from engine.protocol import fastjson
from engine.protocol.body.heartbeat import ExpressionType, SubscriptionData
from engine.protocol.body.message_queue import MessageQueue
from engine.protocol.command import RemotingCommand
from engine.protocol.header.broker import (
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    send_header_v2,
)
from engine.protocol.message import decode_batch_body, encode_record, string_to_properties
from engine.protocol.wire import to_ext

MQ = MessageQueue("T", "broker-a", 3)


def test_uniq_key_layout() -> None:
    gen = UniqIdGenerator(ip="10.0.0.1", pid=0x12345, loader_hash=0xDEADBEEF)
    now = datetime.datetime(2024, 5, 17, 12, 0, 0).astimezone()
    month = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    now_ms = int(now.timestamp() * 1000) + 7
    elapsed = now_ms - int(month.timestamp() * 1000)
    first, second = gen.next(now_ms), gen.next(now_ms)
    assert first == "0A000001" "2345" "DEADBEEF" f"{elapsed:08X}" "0000"
    assert second.endswith("0001") and len(second) == 32
    assert len(UniqIdGenerator(ip="::1", pid=1, loader_hash=1).next()) == 56


def test_client_id_and_address_server_url() -> None:
    config = ClientConfig(client_ip="10.0.0.1", instance_name="inst", unit_name="u1")
    assert config.client_id() == "10.0.0.1@inst@u1"
    assert config.address_server() == "http://jmenv.tbsite.net:8080/rocketmq/nsaddr-u1?nofix=1"
    plain = ClientConfig(client_ip="10.0.0.1", namesrv_domain="ns.example:9000")
    assert plain.address_server() == "http://ns.example:9000/rocketmq/nsaddr"
    pid = plain.with_pid_instance_name()
    assert pid.instance_name.split("#")[0].isdigit() and pid.client_id().startswith("10.0.0.1@")
    assert ClientConfig(instance_name="mine").with_pid_instance_name().instance_name == "mine"


def test_send_header_is_v2_with_one_letter_keys() -> None:
    ext = send_ext(group="PG", topic="%RETRY%CG", queue_id=2, sys_flag=0x301, born_ms=1234,
                   flag=7, properties="a\x01b", default_queue_nums=4, broker_name="broker-a",
                   reconsume_times=3, max_reconsume_times=16)
    reference = to_ext(send_header_v2(SendMessageRequestHeader(
        producer_group="PG", topic="%RETRY%CG", default_topic="TBW102",
        default_topic_queue_nums=4, queue_id=2, sys_flag=0x301, born_timestamp=1234, flag=7,
        properties="a\x01b", reconsume_times=3, max_reconsume_times=16,
        bname="broker-a")))
    assert ext == reference


def test_large_bodies_are_deflated_and_half_messages_prepared() -> None:
    big = Message("T", b"0123456789" * 500, tags="A")
    props, uniq = prepare_message(big)
    cmd = single_request(big, props, MQ, group="PG")
    ext = cmd.ext_fields or {}
    assert cmd.code == 310 and int(ext["f"]) == 0x301
    assert zlib.decompress(cmd.body or b"") == big.body
    assert string_to_properties(ext["i"])["UNIQ_KEY"] == uniq
    small = Message("T", b"x" * 4095, system_properties={"TRAN_MSG": "true", "PGROUP": "PG"})
    cmd = single_request(small, prepare_message(small)[0], MQ, group="PG")
    assert int((cmd.ext_fields or {})["f"]) == 0x4 and cmd.body == small.body


def test_retry_properties_move_into_the_header() -> None:
    msg = Message("%RETRY%CG", b"x", system_properties={"RECONSUME_TIME": "3",
                                                        "MAX_RECONSUME_TIMES": "5"})
    cmd = single_request(msg, prepare_message(msg)[0],
                         MessageQueue("%RETRY%CG", "broker-a", 0), group="PG")
    ext = cmd.ext_fields or {}
    assert (ext["j"], ext["l"]) == ("3", "5")
    assert "RECONSUME_TIME" not in ext["i"] and "MAX_RECONSUME_TIMES" not in ext["i"]


def test_messages_refuse_reserved_property_names_and_keep_keys() -> None:
    with pytest.raises(MessageValidationError, match="UNIQ_KEY"):
        Message("T", b"x", properties={"UNIQ_KEY": "mine"})
    msg = Message("T", b"x", tags="A", keys="k1 k2", properties={"p": "1"}, delay_time_level=3,
                  wait_store_msg_ok=False)
    assert msg.keys == ("k1", "k2")
    assert msg.properties_map() == {"p": "1", "KEYS": "k1 k2", "TAGS": "A", "DELAY": "3",
                                    "WAIT": "false"}


def test_pull_header_sends_the_expression_type_and_optional_subscription() -> None:
    sub = SubscriptionData.build("T", "a > 5", ExpressionType.SQL92, sub_version=99)
    flag = pull_sys_flag(commit_offset=True, suspend=True, subscription=True)
    cmd = pull_request("CG", MQ, 10, sub, max_nums=32, sys_flag=flag, commit_offset=8,
                       suspend_ms=15000)
    assert cmd.ext_fields == to_ext(PullMessageRequestHeader(
        consumer_group="CG", topic="T", queue_id=3, queue_offset=10, max_msg_nums=32,
        sys_flag=0x7, commit_offset=8, suspend_timeout_millis=15000, sub_version=99,
        subscription="a > 5", expression_type="SQL92", bname="broker-a"))
    cmd = pull_request("CG", MQ, 10, sub, max_nums=32, sys_flag=0x3, commit_offset=8,
                       suspend_ms=15000)
    assert "subscription" not in (cmd.ext_fields or {})
    assert (cmd.ext_fields or {})["expressionType"] == "SQL92"


def record(topic: str, offset: int, body: bytes, props: str, sysflag: int = 0) -> bytes:
    return encode_record(topic=topic, body=body, properties=props, queue_id=0,
                         queue_offset=offset, physical_offset=100 * offset, sysflag=sysflag,
                         store_host=("127.0.0.1", 10911), reconsume_times=1)


def test_pull_answer_is_filtered_by_exact_tag_inflated_and_restored_from_retry() -> None:
    body = (record("T", 0, b"a", "TAGS\x01TagA")
            + record("T", 1, b"b", "TAGS\x01TagB")
            + record("%RETRY%CG", 2, zlib.compress(b"c" * 10, 5),
                     "TAGS\x01TagA\x02RETRY_TOPIC\x01T", sysflag=0x301))
    cmd = RemotingCommand(code=0, ext_fields={"nextBeginOffset": "3", "minOffset": "0",
                                              "maxOffset": "3", "suggestWhichBrokerId": "0"},
                          body=body)
    result = pull_result(cmd, MQ, SubscriptionData.build("T", "TagA"), "CG", "b:1")
    assert result.status is PullStatus.FOUND and result.next_begin_offset == 3
    assert [m.body for m in result.messages] == [b"a", b"c" * 10]
    retried = result.messages[1]
    assert retried.topic == "T" and retried.queue_topic == "%RETRY%CG"
    assert retried.properties["MIN_OFFSET"] == "0" and retried.properties["MAX_OFFSET"] == "3"
    moved = RemotingCommand(code=21, ext_fields={"nextBeginOffset": "7", "minOffset": "7",
                                                 "maxOffset": "9"})
    assert pull_result(moved, MQ, None, "CG", "b:1").status is PullStatus.OFFSET_ILLEGAL


def test_batches_split_at_the_size_limit_with_a_key_per_message() -> None:
    msgs = [Message("T", bytes([65 + i]) * 100, tags="A") for i in range(10)]
    parts = chunks(msgs, 600)
    assert sum(len(p.uniq_keys) for p in parts) == 10 and len(parts) > 1
    assert all(len(p.body) <= 600 for p in parts)
    items = [item for p in parts for item in decode_batch_body(p.body)]
    assert [i.body for i in items] == [m.body for m in msgs]
    keys = [string_to_properties(i.properties)["UNIQ_KEY"] for i in items]
    assert keys == [k for p in parts for k in p.uniq_keys] and len(set(keys)) == 10
    for bad in ([Message("T", b"x", delay_time_level=1)], [Message("%RETRY%G", b"x")],
                [Message("T", b"x"), Message("U", b"x")],
                [Message("T", b"x"), Message("T", b"x", wait_store_msg_ok=False)],
                [Message("T", b"x" * 700)]):
        with pytest.raises(MessageValidationError):
            chunks(bad, 600)


def ext(offset: int, size: int = 10) -> MessageExt:
    return MessageExt("T", b"x" * size, {}, "broker-a", 0, offset, 0, 0, 0, 0,
                      ("127.0.0.1", 1), 0, ("127.0.0.1", 2), 0, 0)


def test_process_queue_commits_the_smallest_unconsumed_offset() -> None:
    pq = ProcessQueue()
    assert pq.remove([ext(0)]) == -1  # nothing cached
    pq.put([ext(i) for i in range(5, 10)])
    assert pq.max_span() == 4 and pq.msg_size == 50
    assert pq.remove([ext(6), ext(7)]) == 5
    assert pq.remove([ext(5)]) == 8
    assert pq.remove([ext(8), ext(9)]) == 10 and pq.msg_count == 0


def test_process_queue_orderly_take_commit_and_consume_again() -> None:
    pq = ProcessQueue()
    assert pq.put([ext(3), ext(4), ext(5)]) is True
    assert pq.put([ext(6)]) is False  # a consume task is already due
    taken = pq.take(2)
    assert [m.queue_offset for m in taken] == [3, 4]
    pq.make_consume_again(taken)
    assert [m.queue_offset for m in pq.take(1)] == [3]
    assert pq.commit() == 4
    assert [m.queue_offset for m in pq.take(10)] == [4, 5, 6]
    assert pq.commit() == 7 and pq.take(1) == [] and pq.orderly_busy is False


async def test_local_offset_file_is_fastjson_and_survives_a_lost_file(tmp_path: Path) -> None:
    store = LocalFileOffsetStore(tmp_path, "10.0.0.1@DEFAULT", "BG")
    a, b = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)
    store.update(a, 5, True)
    store.update(a, 3, True)  # increase only
    store.update(b, 7, False)
    await store.persist_all([a, b])
    path = tmp_path / "10.0.0.1@DEFAULT" / "BG" / "offsets.json"
    text = path.read_text()
    assert text.startswith('{\n\t"offsetTable":{{"brokerName":"broker-a","queueId":0,'
                           '"topic":"T"}:5,')
    assert fastjson.loads(text)
    await store.persist_all([a])
    path.unlink()  # the .bak holds the previous write
    again = LocalFileOffsetStore(tmp_path, "10.0.0.1@DEFAULT", "BG")
    await again.load()
    assert await again.read(b, ReadOffsetType.MEMORY) == 7
    assert await again.read(MessageQueue("T", "broker-a", 9), ReadOffsetType.STORE) == -1

"""The proxy's sans-IO parts: settings file, headers, signature, message checks, queue choice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rocketmq.v5.util.misc import Misc

from engine.common.config import ConfigError
from engine.protocol.attributes import TopicMessageType
from engine.proxy.auth import hex_signature, parse_authorization
from engine.proxy.caller import call_context
from engine.proxy.config import ProxyConfig, load_proxy_config, read_proxy_config
from engine.proxy.messages import (
    body_md5,
    check_message_type,
    delay_level,
    message_type,
    to_remoting,
)
from engine.proxy.route import consistent_hash, java_string_hash
from engine.proxy.status import ProxyError
from engine.proxy.v2 import definition_pb2 as pb


def test_proxy_config_takes_apache_keys_and_tells_unknown_from_unused(tmp_path: Path) -> None:
    path = tmp_path / "rmq-proxy.json"
    path.write_text(json.dumps({"rocketMQClusterName": "C1", "grpcServerPort": 9081,
                                "enableTopicMessageTypeCheck": False,
                                "grpcThreadPoolNums": 8, "grpcServerPortt": 1}))
    config, unused, unknown = read_proxy_config(str(path))
    assert (config.cluster_name, config.grpc_server_port) == ("C1", 9081)
    assert config.enable_topic_message_type_check is False
    assert unused == ["grpcThreadPoolNums"]
    assert unknown == ["grpcServerPortt"]
    assert ProxyConfig().grpc_server_port == 8081  # 5.3's default


def test_bad_proxy_config_values_name_their_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="grpcServerPort"):
        load_proxy_config({"grpcServerPort": "eighty"})
    with pytest.raises(ConfigError, match="'grpcFront': 'netty' is not one of h2, grpcio"):
        load_proxy_config({"grpcFront": "netty"})
    assert load_proxy_config({"grpcFront": "grpcio"})[0].grpc_front == "grpcio"
    path = tmp_path / "bad.json"
    path.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="JSON object"):
        read_proxy_config(str(path))


def test_call_context_reads_the_client_headers() -> None:
    ctx = call_context([("x-mq-client-id", "c1"), ("x-mq-language", "PYTHON"),
                        ("x-mq-client-version", "5.1.2")], "ipv4:10.1.2.3:4567")
    assert (ctx.client_id, ctx.remote_addr, ctx.language_code) == ("c1", "10.1.2.3:4567", 3)
    assert ctx.version_ordinal == 413 + 2 * 12  # V5_1_2
    node = call_context([("x-mq-language", "NODE_JS")], "ipv6:[::1]:5")
    assert node.language_code == 13 and node.remote_addr == "[::1]:5"


def test_authorization_header_and_signature() -> None:
    parsed = parse_authorization(
        "MQv2-HMAC-SHA1 Credential=ak1, SignedHeaders=x-mq-date-time, Signature=abc")
    assert parsed is not None
    assert (parsed.access_key, parsed.signature) == ("ak1", "abc")
    assert parse_authorization("Basic xyz") is None
    # HMAC-SHA1("key", "The quick brown fox jumps over the lazy dog"), the RFC 2104 example.
    assert hex_signature("key", "The quick brown fox jumps over the lazy dog") == \
        "de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9"


def _msg(**system: object) -> pb.Message:
    msg = pb.Message(topic=pb.Resource(name="T"), body=b"b")
    msg.system_properties.message_id = "id-1"
    for key, value in system.items():
        setattr(msg.system_properties, key, value)
    return msg


def test_message_types_as_apache_reads_them() -> None:
    NORMAL, FIFO, DELAY, TRANSACTION, MIXED = (
        TopicMessageType.NORMAL, TopicMessageType.FIFO, TopicMessageType.DELAY,
        TopicMessageType.TRANSACTION, TopicMessageType.MIXED)
    config = ProxyConfig()
    assert message_type(to_remoting(_msg(), born_host="h", config=config,
                                    now_ms=0).properties) == NORMAL
    assert message_type(to_remoting(_msg(message_group="g"), born_host="h", config=config,
                                    now_ms=0).properties) == FIFO
    assert message_type(to_remoting(_msg(message_type=pb.TRANSACTION), born_host="h",
                                    config=config, now_ms=0).properties) == TRANSACTION
    delayed = _msg()
    delayed.system_properties.delivery_timestamp.FromMilliseconds(5000)
    out = to_remoting(delayed, born_host="h", config=config, now_ms=0)
    assert message_type(out.properties) == DELAY
    assert out.properties["TIMER_DELIVER_MS"] == "5000"
    check_message_type(MIXED, FIFO)
    check_message_type(FIFO, FIFO)
    with pytest.raises(ProxyError) as info:
        check_message_type(NORMAL, DELAY)
    assert info.value.code == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_message_checks() -> None:
    config = ProxyConfig()
    cases: list[tuple[pb.Message, int]] = []
    too_big = _msg()
    too_big.body = b"x" * (config.max_message_size + 1)
    cases.append((too_big, pb.MESSAGE_BODY_TOO_LARGE))
    cases.append((_msg(message_id=""), pb.ILLEGAL_MESSAGE_ID))
    cases.append((_msg(tag="a|b"), pb.ILLEGAL_MESSAGE_TAG))
    cases.append((_msg(message_group="g" * 64), pb.ILLEGAL_MESSAGE_GROUP))
    late = _msg()
    late.system_properties.delivery_timestamp.FromMilliseconds(config.max_delay_time_mills + 1)
    cases.append((late, pb.ILLEGAL_DELIVERY_TIME))
    control = _msg()
    control.user_properties["k\x01"] = "v"
    cases.append((control, pb.ILLEGAL_MESSAGE_PROPERTY_KEY))
    for msg, code in cases:
        with pytest.raises(ProxyError) as info:
            to_remoting(msg, born_host="h", config=config, now_ms=0)
        assert info.value.code == code


def test_delay_levels_round_up() -> None:
    levels = ProxyConfig().delay_levels_ms()
    assert delay_level(1000, 0, levels) == 1
    assert delay_level(7000, 0, levels) == 3  # 10 s
    assert delay_level(10**9, 0, levels) == 18


def test_queue_choice_matches_guava_and_java() -> None:
    # Guava's own golden values for consistentHash(i, 100) and a few large inputs.
    assert [consistent_hash(i, 100) for i in range(10)] == [0, 55, 62, 8, 45, 59, 86, 97, 82, 59]
    assert consistent_hash(10863919174838991, 11) == 6
    assert consistent_hash(2201, 100001) == 22152
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648  # Java's famous MIN_VALUE


def test_body_digest_is_the_md5_every_client_checks() -> None:
    # 5.3's proxy sends MD5; the Node client reads a CRC32 digest as a decimal number, so the
    # hex CRC32 the Python client accepts made the Node push consumer drop every message.
    assert body_md5(b"abc") == "900150983CD24FB0D6963F7D28E17F72"
    assert body_md5(b"") == Misc.md5_checksum(b"")
    assert body_md5(b"x" * 5000) == Misc.md5_checksum(b"x" * 5000)

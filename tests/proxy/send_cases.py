"""SendMessage requests at and beyond 5.3.3's limits, with the answers Apache 5.3.3 gave them.

Each case is a list of messages to send in one request and the (code, message) Apache
5.3.3's proxy answered it with (run against the build: `test_apache5_send.py` asks both
proxies again).  Messages that Apache prefixes with a Java exception's class name are given
without it (`without_java_class`): this proxy does not name its implementation.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from datetime import timedelta

from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc

HEADERS = (("x-mq-client-id", "send-cases-1"), ("x-mq-language", "PYTHON"),
           ("x-mq-client-version", "5.1.2"), ("x-mq-protocol", "GRPC_V2"))
#: Topics each case may send to, with the message.type they are created with.
TOPICS = {"SdNormal": None, "SdFifo": "FIFO", "SdDelay": "DELAY", "SdTxn": "TRANSACTION"}
MIB4 = 4 * 1024 * 1024
KIB16 = 16 * 1024
CHANNEL_OPTIONS = [("grpc.max_send_message_length", 64 * 1024 * 1024),
                   ("grpc.max_receive_message_length", 64 * 1024 * 1024)]
_ids = itertools.count(1)
_JAVA_CLASS = re.compile(r"^(?:[a-z]+\.)+[A-Za-z]+Exception: ")


def without_java_class(message: str) -> str:
    return _JAVA_CLASS.sub("", message)


def message(topic: str, body: bytes = b"x", *, props: dict[str, str] | None = None,
            keys: tuple[str, ...] = (), delivery_in_ms: int | None = None,
            transaction: bool = False, recovery_s: int | None = None,
            message_id: str | None = None, **system: str) -> pb.Message:
    msg = pb.Message(topic=pb.Resource(name=topic), body=body)
    sysp = msg.system_properties
    sysp.message_id = f"01CA5E{next(_ids):026X}" if message_id is None else message_id
    msg.user_properties.update(props or {})
    sysp.keys.extend(keys)
    if delivery_in_ms is not None:
        sysp.delivery_timestamp.GetCurrentTime()
        sysp.delivery_timestamp.FromMilliseconds(
            sysp.delivery_timestamp.ToMilliseconds() + delivery_in_ms)
    if transaction:
        sysp.message_type = pb.TRANSACTION
    if recovery_s is not None:
        sysp.orphaned_transaction_recovery_duration.FromTimedelta(timedelta(seconds=recovery_s))
    for key, value in system.items():
        setattr(sysp, key, value)
    return msg


Case = tuple[Callable[[], list[pb.Message]], int, str]
OK = (pb.OK, "OK")
BODY_LIMIT = "message body cannot exceed the max 4194304"
PROPS_LIMIT = "the total size of user property is too large, max is 16384"
TOO_LONG = "The specified topic is longer than topic max length 127."
NAME_RULE = "contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
PROPERTIES_ILLEGAL = ("the message is illegal, maybe msg body or properties length not matched. "
                      "msg body length limit 4194304B, msg properties length limit 32KB.")


def _case(make: Callable[[], list[pb.Message]], code: int, text: str) -> Case:
    return (make, code, text)


#: name -> (messages, code, message), as Apache 5.3.3 answered.
CASES: dict[str, Case] = {
    # Sizes: maxMessageSize limits the body alone (each message type), user properties 16 KiB.
    "4 MiB normal": _case(lambda: [message("SdNormal", b"n" * MIB4)], *OK),
    "4 MiB fifo": _case(lambda: [message("SdFifo", b"f" * MIB4, message_group="g1")], *OK),
    "4 MiB delay": _case(lambda: [message("SdDelay", b"d" * MIB4, delivery_in_ms=60_000)], *OK),
    "4 MiB transaction": _case(lambda: [message("SdTxn", b"t" * MIB4, transaction=True)], *OK),
    "4 MiB + 16 KiB of properties": _case(lambda: [message(
        "SdNormal", b"p" * MIB4, props={"k": "v" * (KIB16 - 1)})], *OK),
    "4 MiB + 1": _case(lambda: [message("SdNormal", b"x" * (MIB4 + 1))],
                       pb.MESSAGE_BODY_TOO_LARGE, BODY_LIMIT),
    "property of 16 KiB": _case(lambda: [message("SdNormal", props={"k": "v" * (KIB16 - 1)})],
                                *OK),
    "property of 16 KiB + 1": _case(lambda: [message("SdNormal", props={"k": "v" * KIB16})],
                                    pb.MESSAGE_PROPERTIES_TOO_LARGE, PROPS_LIMIT),
    "129 properties": _case(
        lambda: [message("SdNormal", props={f"p{i}": "v" for i in range(129)})],
        pb.MESSAGE_PROPERTIES_TOO_LARGE, "too many user properties, max is 128"),
    "batch, first with a 40,000-character property": _case(lambda: [
        message("SdNormal", props={"k": "v" * 40_000}), message("SdNormal")],
        pb.MESSAGE_PROPERTIES_TOO_LARGE, PROPS_LIMIT),
    "40,000-character trace context": _case(lambda: [
        message("SdNormal", trace_context="t" * 40_000)],
        pb.INTERNAL_SERVER_ERROR, PROPERTIES_ILLEGAL),
    # Topics.
    "1 MB topic name": _case(lambda: [message("T" * 1_000_000)], pb.ILLEGAL_TOPIC, TOO_LONG),
    "128-character topic": _case(lambda: [message("T" * 128)], pb.ILLEGAL_TOPIC, TOO_LONG),
    "control character in topic": _case(lambda: [message("Sd\x01Normal")], pb.ILLEGAL_TOPIC,
                                        f"The specified topic[Sd\x01Normal] {NAME_RULE}"),
    "blank topic": _case(lambda: [message("")], pb.ILLEGAL_TOPIC,
                         "The specified topic is blank"),
    "system topic prefix": _case(lambda: [message("rmq_sys_x")], pb.ILLEGAL_TOPIC,
                                 "cannot access system topic"),
    "TBW102": _case(lambda: [message("TBW102")], pb.ILLEGAL_TOPIC, "cannot access system topic"),
    "missing topic": _case(lambda: [message("SdMissing")], pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                           "TopicMessageType validate failed, the expected type is UNSPECIFIED, "
                           "but actual type is NORMAL"),
    "messages of two topics": _case(lambda: [message("SdNormal"), message("SdFifo")],
                                    pb.MESSAGE_CORRUPTED, "topic in message is not same"),
    "no message": _case(lambda: [], pb.MESSAGE_CORRUPTED, "no message to send"),
    # Tags, keys, properties: Java's control characters (tab, DEL, U+0085 too) and blanks.
    "tab in tag": _case(lambda: [message("SdNormal", tag="a\tb")], pb.ILLEGAL_MESSAGE_TAG,
                        "tag cannot contain control character"),
    "DEL in tag": _case(lambda: [message("SdNormal", tag="a\x7fb")], pb.ILLEGAL_MESSAGE_TAG,
                        "tag cannot contain control character"),
    "blank tag": _case(lambda: [message("SdNormal", tag="  ")], pb.ILLEGAL_MESSAGE_TAG,
                       "tag cannot be the char sequence of whitespace"),
    "no-break space tag": _case(lambda: [message("SdNormal", tag="\xa0")], *OK),
    "'|' in tag": _case(lambda: [message("SdNormal", tag="a|b")], pb.ILLEGAL_MESSAGE_TAG,
                        "tag cannot contain '|'"),
    "tab in key": _case(lambda: [message("SdNormal", keys=("a\tb",))], pb.ILLEGAL_MESSAGE_KEY,
                        "key cannot contain control character"),
    "blank key": _case(lambda: [message("SdNormal", keys=(" ",))], pb.ILLEGAL_MESSAGE_KEY,
                       "key cannot be the char sequence of whitespace"),
    "empty key": _case(lambda: [message("SdNormal", keys=("",))], *OK),
    "newline in a property name": _case(lambda: [message("SdNormal", props={"a\nb": "v"})],
                                        pb.ILLEGAL_MESSAGE_PROPERTY_KEY,
                                        "the key of property cannot contain control character"),
    "U+0085 in a property value": _case(lambda: [message("SdNormal", props={"ab": "v\x85"})],
                                        pb.ILLEGAL_MESSAGE_PROPERTY_KEY,
                                        "the value of property cannot contain control character"),
    "reserved property name": _case(lambda: [message("SdNormal", props={"UNIQ_KEY": "v"})],
                                    pb.ILLEGAL_MESSAGE_PROPERTY_KEY,
                                    "property is used by system: UNIQ_KEY"),
    "empty property name": _case(lambda: [message("SdNormal", props={"": "v"})], *OK),
    # Message groups, ids, bodies, times.
    "63-byte group": _case(lambda: [message("SdFifo", message_group="g" * 63)], *OK),
    "64-byte group": _case(lambda: [message("SdFifo", message_group="g" * 64)],
                           pb.ILLEGAL_MESSAGE_GROUP, "message group exceed the max size 64"),
    "blank group": _case(lambda: [message("SdFifo", message_group=" ")], pb.ILLEGAL_MESSAGE_GROUP,
                         "message group cannot be the char sequence of whitespace"),
    "NUL in group": _case(lambda: [message("SdFifo", message_group="a\x00")],
                          pb.ILLEGAL_MESSAGE_GROUP,
                          "message group cannot contain control character"),
    "no message id": _case(lambda: [message("SdNormal", message_id="")], pb.ILLEGAL_MESSAGE_ID,
                           "message id cannot be empty"),
    "empty body": _case(lambda: [message("SdNormal", b"")], pb.MESSAGE_BODY_EMPTY,
                        "message body cannot be empty"),
    "delivery beyond a day": _case(lambda: [message("SdDelay", delivery_in_ms=86_460_000)],
                                   pb.ILLEGAL_DELIVERY_TIME,
                                   "the max delay time of message is too large, max is 86400000"),
    "delivery in the past": _case(lambda: [message("SdDelay", delivery_in_ms=-60_000)], *OK),
    "recovery beyond an hour": _case(lambda: [message("SdTxn", transaction=True, recovery_s=3601)],
                                     pb.BAD_REQUEST, "the max transaction recovery time of "
                                     "message is too large, max is 3600"),
}


async def answers(stub: service_pb2_grpc.MessagingServiceStub, names: list[str]
                  ) -> dict[str, tuple[str, str]]:
    """Each case's (code name, message without a Java class name) from the proxy."""
    out: dict[str, tuple[str, str]] = {}
    for name in names:
        make, _, _ = CASES[name]
        response = await stub.SendMessage(spb.SendMessageRequest(messages=make()),
                                          metadata=HEADERS, timeout=30)
        out[name] = (pb.Code.Name(response.status.code),
                     without_java_class(response.status.message))
    return out


def expected(names: list[str]) -> dict[str, tuple[str, str]]:
    return {name: (pb.Code.Name(CASES[name][1]), CASES[name][2]) for name in names}

"""Drives the Apache C++ client (PyPI `rocketmq==0.4.4`) for the compatibility tests.

Usage:
  python cpp_client.py produce NAMESRV TOPIC COUNT MODE      MODE = sync | async | oneway
  python cpp_client.py push    NAMESRV TOPIC GROUP COUNT
  python cpp_client.py pull    NAMESRV TOPIC GROUP COUNT
  python cpp_client.py push-retry NAMESRV TOPIC GROUP COUNT     fail each message's first delivery
  python cpp_client.py produce-orderly NAMESRV TOPIC COUNT      key i % 2 picks the queue
  python cpp_client.py push-orderly NAMESRV TOPIC GROUP COUNT   fail message 3 once, in place
  python cpp_client.py push-props NAMESRV TOPIC GROUP COUNT NAMES   also report properties NAMES
                                                                (comma-separated) and the msg id
  python cpp_client.py produce-large NAMESRV TOPIC COUNT SIZE   bodies of SIZE bytes (compressed
                                                                by the C++ client over 4 KiB)
  python cpp_client.py produce-try NAMESRV TOPIC COUNT        sync sends; a refused send is
                                                                reported as {"refused": ...}
With CPP_ACCESS_KEY and CPP_SECRET_KEY set, producers and consumers sign their requests
(`set_session_credentials`).
Each message i has body "cpp-<MODE>-<i>", tags "Tag<i % 2>", keys "key-<i>", property
seq=<i>.  Prints one JSON line per sent or received message and a final {"done": ...} line;
the C++ client writes its logs under $HOME/logs.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

_OUT = threading.Lock()


def _emit(record: dict[str, object]) -> None:
    """One JSON line; the C++ client calls back from its own threads, so lines are locked."""
    line = json.dumps(record) + "\n"
    with _OUT:
        sys.stdout.write(line)
        sys.stdout.flush()


def _signed(client: object) -> object:
    """Give the client the session credentials of the environment, if any."""
    ak, sk = os.environ.get("CPP_ACCESS_KEY"), os.environ.get("CPP_SECRET_KEY")
    if ak is not None and sk is not None:
        client.set_session_credentials(ak, sk, "")  # type: ignore[attr-defined]
    return client


def produce_try(namesrv: str, topic: str, count: int) -> int:
    from rocketmq.client import Message, Producer

    producer = _signed(Producer("CompatTryProducer"))
    producer.set_namesrv_addr(namesrv)  # type: ignore[attr-defined]
    producer.start()  # type: ignore[attr-defined]
    try:
        for i in range(count):
            msg = Message(topic)
            msg.set_body(f"cpp-try-{i}")
            try:
                result = producer.send_sync(msg)  # type: ignore[attr-defined]
                _emit({"sent": i, "status": int(result.status)})
            except Exception as exc:
                _emit({"refused": i, "error": str(exc)[-500:]})
    finally:
        producer.shutdown()  # type: ignore[attr-defined]
    _emit({"done": "produce-try"})
    return 0


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def produce(namesrv: str, topic: str, count: int, mode: str) -> int:
    from rocketmq.client import Message, Producer

    producer = Producer(f"CompatProducer_{mode}")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    done = threading.Semaphore(0)
    failures: list[str] = []
    try:
        for i in range(count):
            msg = Message(topic)
            msg.set_keys(f"key-{i}")
            msg.set_tags(f"Tag{i % 2}")
            msg.set_body(f"cpp-{mode}-{i}")
            msg.set_property("seq", str(i))
            if mode == "sync":
                result = producer.send_sync(msg)
                _emit({"sent": i, "status": int(result.status), "msgId": result.msg_id,
                       "offset": result.offset})
            elif mode == "async":
                def ok(result: object, i: int = i) -> None:
                    _emit({"sent": i, "msgId": result.msg_id})  # type: ignore[attr-defined]
                    done.release()

                def failed(exc: Exception, i: int = i) -> None:
                    failures.append(f"{i}: {exc}")
                    done.release()

                producer.send_async(msg, ok, failed)
            else:
                producer.send_oneway(msg)
                _emit({"sent": i})
        if mode == "async":
            for _ in range(count):
                if not done.acquire(timeout=30):
                    failures.append("async send callback never came")
                    break
    finally:
        producer.shutdown()
    _emit({"done": mode, "failures": failures})
    return 1 if failures else 0


def _received(msg: object) -> dict[str, object]:
    m = msg
    return {"body": _text(m.body), "tags": _text(m.tags), "keys": _text(m.keys),  # type: ignore[attr-defined]
            "seq": _text(m.get_property("seq")), "topic": _text(m.topic)}  # type: ignore[attr-defined]


def push(namesrv: str, topic: str, group: str, count: int) -> int:
    from rocketmq.client import PushConsumer

    consumer = _signed(PushConsumer(group))
    consumer.set_namesrv_addr(namesrv)  # type: ignore[attr-defined]
    seen: set[str] = set()
    lock = threading.Lock()
    all_in = threading.Event()

    def on_message(msg: object) -> None:
        record = _received(msg)
        with lock:
            if record["body"] not in seen:
                seen.add(str(record["body"]))
                _emit({"received": record})
            if len(seen) >= count:
                all_in.set()

    consumer.subscribe(topic, on_message)
    consumer.start()
    ok = all_in.wait(60)
    consumer.shutdown()
    _emit({"done": "push", "received": len(seen)})
    return 0 if ok else 1


def pull(namesrv: str, topic: str, group: str, count: int) -> int:
    from rocketmq.client import PullConsumer

    consumer = PullConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    consumer.start()
    seen: set[str] = set()
    deadline = time.monotonic() + 60
    while len(seen) < count and time.monotonic() < deadline:
        for msg in consumer.pull(topic):
            record = _received(msg)
            if record["body"] not in seen:
                seen.add(str(record["body"]))
                _emit({"received": record})
    consumer.shutdown()
    _emit({"done": "pull", "received": len(seen)})
    return 0 if len(seen) >= count else 1


def _subscribe(consumer: object, topic: str, on_message: object) -> None:
    """Subscribe with a callback returning True (CONSUME_SUCCESS) or False (RECONSUME_LATER).

    The binding's own `subscribe` re-raises a listener's exception inside the ctypes callback,
    where ctypes drops it and the C++ client reads an undefined status; failures must reach
    the C++ client as a status instead.  One message per call, so one failure is one retry.
    """
    from rocketmq.client import RecvMessage, _to_bytes  # type: ignore[attr-defined]
    from rocketmq.exceptions import ffi_check  # type: ignore[attr-defined]
    from rocketmq.ffi import dll  # type: ignore[attr-defined]

    def status(_consumer: object, msg: object) -> int:
        try:
            return 0 if on_message(RecvMessage(msg)) else 1  # type: ignore[operator]
        except Exception as exc:  # a bug in the driver: say so, and let it be retried
            _emit({"driver_error": repr(exc)})
            return 1

    consumer.set_message_batch_max_size(1)  # type: ignore[attr-defined]
    ffi_check(dll.Subscribe(consumer._handle, _to_bytes(topic), b"*"))  # type: ignore[attr-defined]
    consumer._register_callback(status)  # type: ignore[attr-defined]


def push_retry(namesrv: str, topic: str, group: str, count: int) -> int:
    """Fail every message the first time (RECONSUME_LATER -> send-back), take it the second."""
    from rocketmq.client import PushConsumer

    consumer = PushConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    failed: set[str] = set()
    taken: set[str] = set()
    lock = threading.Lock()
    all_in = threading.Event()

    def on_message(msg: object) -> bool:
        record = _received(msg)
        record["reconsume"] = msg.reconsume_times  # type: ignore[attr-defined]
        body = str(record["body"])
        with lock:
            if body not in failed:
                failed.add(body)
                _emit({"failed": record})
                return False
            if body not in taken:
                taken.add(body)
                _emit({"received": record})
            if len(taken) >= count:
                all_in.set()
        return True

    _subscribe(consumer, topic, on_message)
    consumer.start()
    ok = all_in.wait(90)
    consumer.shutdown()
    _emit({"done": "push-retry", "received": len(taken)})
    return 0 if ok else 1


def produce_orderly(namesrv: str, topic: str, count: int) -> int:
    from rocketmq.client import Message, Producer

    producer = Producer("CompatOrderlyProducer")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    try:
        for i in range(count):
            msg = Message(topic)
            msg.set_keys(f"key-{i}")
            msg.set_tags(f"Tag{i % 2}")
            msg.set_body(f"cpp-orderly-{i}")
            msg.set_property("seq", str(i))
            result = producer.send_orderly(msg, i % 2)
            _emit({"sent": i, "status": int(result.status), "offset": result.offset})
    finally:
        producer.shutdown()
    _emit({"done": "produce-orderly"})
    return 0


def push_orderly(namesrv: str, topic: str, group: str, count: int) -> int:
    """Consume orderly; message 3 fails once and must come back before anything after it."""
    from rocketmq.client import PushConsumer

    consumer = PushConsumer(group, orderly=True)
    consumer.set_namesrv_addr(namesrv)
    seen: set[str] = set()
    failed_once = threading.Event()
    lock = threading.Lock()
    all_in = threading.Event()

    def on_message(msg: object) -> bool:
        record = _received(msg)
        record["queue"] = msg.queue_id  # type: ignore[attr-defined]
        record["offset"] = msg.queue_offset  # type: ignore[attr-defined]
        with lock:
            if record["seq"] == "3" and not failed_once.is_set():
                failed_once.set()
                _emit({"failed": record})
                return False
            _emit({"received": record})
            seen.add(str(record["body"]))
            if len(seen) >= count:
                all_in.set()
        return True

    _subscribe(consumer, topic, on_message)
    consumer.start()
    ok = all_in.wait(90)
    consumer.shutdown()
    _emit({"done": "push-orderly", "received": len(seen)})
    return 0 if ok else 1


def push_props(namesrv: str, topic: str, group: str, count: int, names: str) -> int:
    """`push`, reporting the named properties and the message id as well."""
    from rocketmq.client import PushConsumer

    consumer = _signed(PushConsumer(group))
    consumer.set_namesrv_addr(namesrv)  # type: ignore[attr-defined]
    seen: set[str] = set()
    lock = threading.Lock()
    all_in = threading.Event()

    def on_message(msg: object) -> None:
        record = _received(msg)
        record["msgId"] = _text(msg.id)  # type: ignore[attr-defined]
        record["properties"] = {name: _text(msg.get_property(name))  # type: ignore[attr-defined]
                                for name in names.split(",") if name}
        with lock:
            if record["body"] not in seen:
                seen.add(str(record["body"]))
                _emit({"received": record})
            if len(seen) >= count:
                all_in.set()

    consumer.subscribe(topic, on_message)
    consumer.start()
    ok = all_in.wait(60)
    consumer.shutdown()
    _emit({"done": "push-props", "received": len(seen)})
    return 0 if ok else 1


def produce_large(namesrv: str, topic: str, count: int, size: int) -> int:
    """Sync sends of SIZE-byte bodies "cpp-large-<i>:" padded with "x"."""
    from rocketmq.client import Message, Producer

    producer = Producer("CompatLargeProducer")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    try:
        for i in range(count):
            msg = Message(topic)
            msg.set_keys(f"key-{i}")
            msg.set_tags(f"Tag{i % 2}")
            msg.set_body(f"cpp-large-{i}:".ljust(size, "x"))
            msg.set_property("seq", str(i))
            result = producer.send_sync(msg)
            _emit({"sent": i, "status": int(result.status), "msgId": result.msg_id})
    finally:
        producer.shutdown()
    _emit({"done": "produce-large"})
    return 0


def main() -> int:
    command, namesrv, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    if command == "produce":
        return produce(namesrv, topic, int(sys.argv[4]), sys.argv[5])
    if command == "push":
        return push(namesrv, topic, sys.argv[4], int(sys.argv[5]))
    if command == "pull":
        return pull(namesrv, topic, sys.argv[4], int(sys.argv[5]))
    if command == "push-retry":
        return push_retry(namesrv, topic, sys.argv[4], int(sys.argv[5]))
    if command == "produce-orderly":
        return produce_orderly(namesrv, topic, int(sys.argv[4]))
    if command == "push-orderly":
        return push_orderly(namesrv, topic, sys.argv[4], int(sys.argv[5]))
    if command == "push-props":
        return push_props(namesrv, topic, sys.argv[4], int(sys.argv[5]), sys.argv[6])
    if command == "produce-try":
        return produce_try(namesrv, topic, int(sys.argv[4]))
    if command == "produce-large":
        return produce_large(namesrv, topic, int(sys.argv[4]), int(sys.argv[5]))
    raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    sys.exit(main())

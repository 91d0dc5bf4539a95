"""Drives the Apache C++ client (PyPI `rocketmq==0.4.4`) for the compatibility tests.

Usage:
  python cpp_client.py produce NAMESRV TOPIC COUNT MODE      MODE = sync | async | oneway
  python cpp_client.py push    NAMESRV TOPIC GROUP COUNT
  python cpp_client.py pull    NAMESRV TOPIC GROUP COUNT
Each message i has body "cpp-<MODE>-<i>", tags "Tag<i % 2>", keys "key-<i>", property
seq=<i>.  Prints one JSON line per sent or received message and a final {"done": ...} line;
the C++ client writes its logs under $HOME/logs.
"""

from __future__ import annotations

import json
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

    consumer = PushConsumer(group)
    consumer.set_namesrv_addr(namesrv)
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


def main() -> int:
    command, namesrv, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    if command == "produce":
        return produce(namesrv, topic, int(sys.argv[4]), sys.argv[5])
    if command == "push":
        return push(namesrv, topic, sys.argv[4], int(sys.argv[5]))
    if command == "pull":
        return pull(namesrv, topic, sys.argv[4], int(sys.argv[5]))
    raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    sys.exit(main())

"""The Apache C++ client (PyPI `rocketmq` 0.4.4, 4.x remoting) and the official RocketMQ 5
Python client (through the gRPC proxy) as producer processes for the failover benchmark.

    python -m benchmarks.client_producers cpp  NAMESRV  TOPIC PREFIX
    python -m benchmarks.client_producers grpc ENDPOINT TOPIC PREFIX

Each sends numbered bodies (`<PREFIX><8 digits>`) one after the other, synchronously, with
the client's own retries and route handling, until its stdin closes, and prints one line per
send in `java_producer`'s format; neither client says which broker stored a message, so the
broker is `?`, followed by when the send began (`time.monotonic()`, system-wide on Linux):

    <number> SEND_OK ? <started>
    <number> ERROR <exception class> <started>

A body counts as acknowledged only when the client said it was sent OK.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.java_producer import JavaProducer, Outcome


def _loop(send: Callable[[bytes], bool], prefix: str) -> None:
    stop = threading.Event()

    def eof() -> None:
        while sys.stdin.buffer.read(1):
            pass
        stop.set()

    threading.Thread(target=eof, daemon=True).start()
    i = 0
    while not stop.is_set():
        body = f"{prefix}{i:08d}".encode()
        started = time.monotonic()
        try:
            line = f"{i} {'SEND_OK' if send(body) else 'NOT_OK'} ? {started:.6f}"
        except Exception as exc:  # the client's own error types: a failed send
            line = f"{i} ERROR {type(exc).__name__} {started:.6f}"
            time.sleep(0.02)
        print(line, flush=True)
        i += 1


def cpp(namesrv: str, topic: str, prefix: str) -> None:
    from rocketmq.client import Message, Producer, SendStatus

    producer = Producer("FailoverCppPG")
    producer.set_namesrv_addr(namesrv)
    producer.start()

    def send(body: bytes) -> bool:
        msg = Message(topic)
        msg.set_body(body.decode())
        return bool(producer.send_sync(msg).status == SendStatus.OK)

    try:
        _loop(send, prefix)
    finally:
        producer.shutdown()


def grpc(endpoint: str, topic: str, prefix: str) -> None:
    from rocketmq.v5.client import ClientConfiguration, Credentials
    from rocketmq.v5.model import Message
    from rocketmq.v5.producer import Producer

    producer = Producer(ClientConfiguration(endpoint, Credentials()), (topic,))
    producer.startup()

    def send(body: bytes) -> bool:
        msg = Message()
        msg.topic, msg.body = topic, body
        producer.send(msg)  # raises unless the proxy answered OK
        return True

    try:
        _loop(send, prefix)
    finally:
        producer.shutdown()


class ClientProducer(JavaProducer):
    """One of these clients as a child process (HOME under `workdir`, for its logs); read
    like the Java producer."""

    def __init__(self, workdir: Path, kind: str, address: str, topic: str,
                 prefix: str) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.args = [sys.executable, "-m", "benchmarks.client_producers", kind, address, topic,
                     prefix]
        self.env = {"HOME": str(workdir)}
        self.prefix = prefix
        self.outcomes: list[Outcome] = []
        self.proc = None


if __name__ == "__main__":
    {"cpp": cpp, "grpc": grpc}[sys.argv[1]](*sys.argv[2:5])

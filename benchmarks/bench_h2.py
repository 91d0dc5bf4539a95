"""In-process HTTP/2 server connection cost per unary gRPC call (no sockets).

Requests built with an HPACK encoder as a client does: HEADERS + DATA of a 1 KiB gRPC
message with END_STREAM, 64 requests per `receive` call. Each is answered with `send_unary`
(HEADERS, DATA, trailing HEADERS) and the batch's bytes taken with `data_to_send`.

* h2load (`h2load -c 4 -m 64 -d body.bin -H 'content-type: application/grpc'`): the same
  fields every time, so HEADERS is all indexed after the first request (the decoded-block
  cache answers). Target: at most 6 us per request.
* a RocketMQ 5 client: 15 fields, of which a request id, a date and a gRPC deadline change
  with every request (literals added to the dynamic table: decoded every time).
"""

from __future__ import annotations

import statistics
import struct
import time
from collections.abc import Callable

from hpack import Encoder

from benchmarks.machine import machine, percentile
from engine.proxy.h2.connection import ServerConnection
from engine.proxy.h2.events import DataReceived
from engine.proxy.h2.frames import (
    DATA,
    END_HEADERS,
    END_STREAM,
    HEADERS,
    PREFACE,
    SETTINGS,
    encode_frame,
    encode_headers,
    encode_window_update,
)

N = 60_000
BATCH = 64
BODY = b"\x00" + struct.pack(">I", 1024) + b"q" * 1024
HEAD = encode_headers([(":status", "200"), ("content-type", "application/grpc")])
TRAILERS = encode_headers([("grpc-status", "0")])
REPLY = b"\x00" + struct.pack(">I", 20) + b"r" * 20
FIELDS = [(":method", "POST"), (":scheme", "http"), (":path", "/x"),
          (":authority", "127.0.0.1:8081"), ("user-agent", "h2load nghttp2/1.52.0"),
          ("content-type", "application/grpc"), ("content-length", str(len(BODY)))]


def rocketmq_fields(i: int) -> list[tuple[str, str]]:
    """What a RocketMQ 5 Java client sends with its i-th SendMessage (the values made up)."""
    return [(":scheme", "http"), (":method", "POST"),
            (":path", "/apache.rocketmq.v2.MessagingService/SendMessage"),
            (":authority", "127.0.0.1:8081"), ("content-type", "application/grpc"),
            ("te", "trailers"), ("user-agent", "grpc-java-netty/1.53.0"),
            ("x-mq-language", "JAVA"), ("x-mq-protocol", "v2"),
            ("x-mq-client-version", "5.0.5"), ("x-mq-client-id", "host@4242@0@1a2b3c4d5e"),
            ("x-mq-request-id", f"{i:08x}-4b1e-4c2a-9d3f-{i * 7919:012x}"),
            ("x-mq-date-time", f"20261129T08{i // 60 % 60:02d}{i % 60:02d}Z"),
            ("grpc-accept-encoding", "gzip"), ("grpc-timeout", f"{2_999_000 - i % 1000}u")]


def client_bytes(fields: Callable[[int], list[tuple[str, str]]]) -> list[bytes]:
    """The client's bytes: preface + SETTINGS + a large connection window, then one chunk
    of BATCH requests per `receive`."""
    encoder = Encoder()
    chunks = [PREFACE + encode_frame(SETTINGS, 0, 0) + encode_window_update(0, 1 << 30)]
    for first in range(0, N, BATCH):
        chunks.append(b"".join(
            encode_frame(HEADERS, END_HEADERS, 2 * i + 1, encoder.encode(fields(i)))
            + encode_frame(DATA, END_STREAM, 2 * i + 1, BODY)
            for i in range(first, min(N, first + BATCH))))
    return chunks


def run_once(chunks: list[bytes]) -> tuple[float, list[float]]:
    """Seconds per request over the run, and per request of each batch."""
    conn = ServerConnection()
    conn.initiate()
    conn.receive(chunks[0])
    conn.data_to_send()
    per_batch = []
    clock = time.perf_counter
    begin = clock()
    for chunk in chunks[1:]:
        start = clock()
        for event in conn.receive(chunk):
            if type(event) is DataReceived and event.end_stream:
                conn.send_unary(event.stream_id, HEAD, REPLY, TRAILERS)
        conn.data_to_send()
        per_batch.append((clock() - start) / BATCH)
    assert conn.open_streams == 0
    return (clock() - begin) / N, per_batch


def measure(label: str, chunks: list[bytes], target: float | None) -> None:
    run_once(chunks)  # warm-up
    runs = []
    batches: list[float] = []
    for _ in range(5):
        per_request, per_batch = run_once(chunks)
        runs.append(per_request * 1e6)
        batches += [b * 1e6 for b in per_batch]
    med = statistics.median(runs)
    line = (f"{label}: median {med:.2f} us/request over 5 runs (min {min(runs):.2f}, max "
            f"{max(runs):.2f}); per batch p50 {percentile(batches, 50):.2f}, p99 "
            f"{percentile(batches, 99):.2f} us/request")
    if target is not None:
        line += f"  target <= {target:g}: {'met' if med <= target else 'MISSED'}"
    print(line)


def main() -> None:
    print(machine())
    print(f"receive + send_unary + data_to_send, {N:,} requests of 1 KiB, {BATCH} per receive")
    measure("h2load's headers (cached)", client_bytes(lambda _: FIELDS), 6)
    measure("a RocketMQ 5 client's headers (decoded each time)", client_bytes(rocketmq_fields),
            None)


if __name__ == "__main__":
    main()

"""In-process frame decode + encode per second (no sockets).

Decodes a realistic request frame (a Java SEND_MESSAGE_V2 header with properties, JSON and
ROCKETMQ serializations) and encodes its response, as a broker does for every send.
Target (issue): at least 150,000 header decode+encode per second.
"""

from __future__ import annotations

import time

from benchmarks.machine import machine, summary
from engine.protocol.codes import LanguageCode, SerializeType
from engine.protocol.command import RemotingCommand, encode
from engine.protocol.frame import FrameDecoder

SEND_V2 = {
    "a": "PeerProducerGroup_java", "b": "StubTopic", "c": "TBW102", "d": "4", "e": "3",
    "f": "0", "g": "1795305881681", "h": "0",
    "i": "KEYS\x01key-1795305881419-0\x02UNIQ_KEY\x01FD00000000000000000000000000022FAB30946E09"
         "6C29D8500000\x02WAIT\x01true\x02TAGS\x01TagA",
    "j": "0", "k": "false", "m": "false", "n": "broker-a",
}
RESPONSE_EXT = {"msgId": "7F00000100002A9F0000000000000000", "queueId": "3",
                "queueOffset": "42", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}


def run_once(serialize: SerializeType, n: int) -> float:
    frame = encode(RemotingCommand(code=310, opaque=7, language=LanguageCode.JAVA, version=409,
                                   ext_fields=SEND_V2, body=b"x" * 1024,
                                   serialize_type=serialize))
    batch = frame * 100
    decoder = FrameDecoder()
    start = time.perf_counter()
    done = 0
    while done < n:
        for cmd in decoder.feed(batch):
            encode(cmd.response(ext_fields=RESPONSE_EXT))
        done += 100
    return done / (time.perf_counter() - start)


def main() -> None:
    print(machine())
    for serialize in SerializeType:
        run_once(serialize, 20_000)  # warm-up
        rates = [run_once(serialize, 100_000) for _ in range(7)]
        print(summary(f"decode+encode {serialize.name} header (SEND_MESSAGE_V2, 1 KiB body)",
                      rates, "frames/s", 150_000))


if __name__ == "__main__":
    main()

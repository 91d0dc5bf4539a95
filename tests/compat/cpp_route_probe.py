"""Run by the compatibility tests in a subprocess: the Apache C++ client resolves a topic's queues.

Usage: python cpp_route_probe.py NAMESRV_ADDR TOPIC
Prints one JSON line: {"queues": [{"topic":..., "brokerName":..., "queueId":...}, ...]}, or
{"error": "..."}; the C++ client writes its logs under $HOME/logs.
"""

from __future__ import annotations

import ctypes
import json
import sys


def main() -> int:
    namesrv, topic = sys.argv[1], sys.argv[2]
    from rocketmq.client import PullConsumer
    from rocketmq.ffi import _CMessageQueue, dll

    consumer = PullConsumer("CompatProbeGroup")
    consumer.set_namesrv_addr(namesrv)
    consumer.start()
    queues = ctypes.POINTER(_CMessageQueue)()
    size = ctypes.c_int()
    code = dll.FetchSubscriptionMessageQueues(
        consumer._handle, topic.encode(), ctypes.pointer(queues), ctypes.pointer(size)
    )
    if code != 0:
        print(json.dumps({"error": f"FetchSubscriptionMessageQueues returned {code}"}))
        return 1
    out = [
        {
            "topic": queues[i].topic.decode(),
            "brokerName": queues[i].brokerName.decode(),
            "queueId": queues[i].queueId,
        }
        for i in range(size.value)
    ]
    dll.ReleaseSubscriptionMessageQueue(queues)
    print(json.dumps({"queues": out}), flush=True)
    consumer.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

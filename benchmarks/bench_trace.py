"""What message trace costs a producer: send throughput with and without `enable_trace`.

Runs `mqnamesrv` and `mqbroker` (traceTopicEnable=true) as processes of their own; a
producer sends 1 KiB messages with 64 in flight, untraced (its tracer detached) and traced
runs alternating (the order flipping each round) so the machine's drift hits both alike.
Prints the median messages per second of each, the traced one's loss in percent (the issue's
budget: at most 15%) from those medians and as the median of each round's own loss (the
steadier figure on a shared machine: a round's two runs follow each other), the client's and
the broker's CPU per message (the broker's includes storing and indexing the trace
messages), and the trace records dropped or failed (none expected).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics

from benchmarks.bench_client import measure, namesrv_process, prepare, sends
from benchmarks.machine import machine
from benchmarks.processes import broker_process, cpu_seconds, server_pid
from engine.client import ClientConfig, Producer, ProducerOptions
from engine.remoting.loop import run

RUNS = 7
SENDS = 8_192
IN_FLIGHT = 64


async def bench(namesrv: str, broker: str, runs: int = RUNS, sends_per_run: int = SENDS,
                two_producers: bool = False) -> None:
    await prepare(namesrv, broker)
    config = ClientConfig(namesrv_addr=namesrv)
    traced = Producer("TraceBenchTracedPG", config,
                      options=ProducerOptions(enable_trace=True))
    # by default the untraced runs are the same producer with its tracer detached: two
    # producers of one process measure apart even when neither is traced
    plain = Producer("TraceBenchPlainPG", config) if two_producers else traced
    tracer = traced.tracer
    if two_producers:
        await plain.start()
    await traced.start()
    results: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
    broker_cpu: dict[str, list[float]] = {"off": [], "on": []}
    pid = server_pid(broker)
    try:
        for producer in {plain, traced}:  # warm-up: routes, connections, the trace topic
            await sends(producer, IN_FLIGHT, 2000)
        order = [("off", plain), ("on", traced)]
        for run_no in range(runs):  # the order flips every round: neither pays the other's tail
            for label, producer in (order if run_no % 2 == 0 else order[::-1]):
                traced.tracer = tracer if label == "on" or two_producers else None
                before = cpu_seconds(pid)
                results[label].append(await measure(sends_per_run, functools.partial(
                    sends, producer, IN_FLIGHT, sends_per_run)))
                if producer.tracer is not None:
                    await producer.tracer.dispatcher.flush()  # its trace messages count too
                broker_cpu[label].append((cpu_seconds(pid) - before) / sends_per_run * 1e6)
        traced.tracer = tracer
        assert traced.tracer is not None
        dispatcher = traced.tracer.dispatcher
        await dispatcher.flush()
        rates = {k: statistics.median(r for _, r in v) for k, v in results.items()}
        cpus = {k: statistics.median(c for c, _ in v) for k, v in results.items()}
        for label in ("off", "on"):
            print(f"trace {label}: median {rates[label]:,.0f} msgs/s, "
                  f"{cpus[label]:.1f} us client CPU/msg, "
                  f"{statistics.median(broker_cpu[label]):.1f} us broker CPU/msg "
                  f"({runs} runs of {sends_per_run:,}, "
                  f"{IN_FLIGHT} in flight, 1 KiB)")
        paired = statistics.median(1 - on[1] / off[1]
                                   for on, off in zip(results["on"], results["off"], strict=True))
        print(f"throughput lost to tracing: {100 * (1 - rates['on'] / rates['off']):.1f}% "
              f"(median of the rounds' own losses: {100 * paired:.1f}%) "
              f"(records sent {dispatcher.sent:,}, dropped {dispatcher.dropped:,}, "
              f"failed {dispatcher.failed:,}); load average {os.getloadavg()[0]:.1f}")
    finally:
        traced.tracer = tracer
        await traced.shutdown()
        if two_producers:
            await plain.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help="rounds of both")
    parser.add_argument("--sends", type=int, default=SENDS, help="messages a run")
    parser.add_argument("--two-producers", action="store_true",
                        help="an untraced producer beside the traced one (as measured first)")
    args = parser.parse_args()
    print(machine())
    with namesrv_process() as namesrv, broker_process(namesrvAddr=namesrv,
                                                      traceTopicEnable="true") as broker:
        run(bench(namesrv, broker, args.runs, args.sends, args.two_producers))


if __name__ == "__main__":
    main()

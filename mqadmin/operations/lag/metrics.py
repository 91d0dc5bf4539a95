"""The lag collector's /metrics: rocketmq-exporter's names and labels, plus the verdicts,
time lag, ready and in-flight split, ETAs, retention risks and dead letters only the
collector knows (``rocketmq_lag_*``).

How this works: `LagMetrics` is a prometheus_client `Collector` that reads the collector's
latest cycle (`Latest`, replaced in one assignment at the end of each cycle) when /metrics
is asked for, as rocketmq-exporter does from its caches: nothing is pushed from the cycle.
The exporter's families keep its names, HELP texts and label names exactly
(RMQMetricsCollector.java), so its dashboards and alert rules work unchanged; the values
come from the same admin reads it makes (consume stats, the oldest unconsumed message,
consumer connections, topic stats, runtime info).  Every family is present in every scrape,
empty until the first cycle.  `MetricsServer` serves the registry from prometheus_client's
own HTTP server in a thread; `stop()` shuts it down.  docs/monitoring.md maps every name.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_wsgi_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from engine.protocol.body.heartbeat import MessageModel
from mqadmin.operations.lag.extras import MASTER_ID, Latest
from mqadmin.operations.targets import DLQ_PREFIX, RETRY_PREFIX
from mqadmin.reports.contract import SEVERITY, Status


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family: name, type (gauge or counter), HELP and label names."""

    name: str
    kind: str
    help: str
    labels: tuple[str, ...]


_DIFF = ("group", "topic", "countOfOnlineConsumers", "msgModel")
_GROUP_NUMS = ("cluster", "broker", "topic", "group")
_TOPIC = ("cluster", "broker", "topic")
_RUNTIME = ("cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version")

#: rocketmq-exporter's families the collector gives (RMQMetricsCollector.java: names, HELP
#: and label names as there, typos included).
EXPORTER = (
    Family("rocketmq_group_diff", "gauge", "GroupDiff", _DIFF),
    Family("rocketmq_group_retrydiff", "gauge", "GroupRetryDiff", _DIFF),
    Family("rocketmq_group_dlqdiff", "gauge", "GroupDLQDiff", _DIFF),
    Family("rocketmq_group_count", "gauge", "GroupCount", ("caddr", "localaddr", "group")),
    Family("rocketmq_consumer_offset", "gauge", "GroupBrokerTotalOffset", _GROUP_NUMS),
    Family("rocketmq_group_get_latency_by_storetime", "gauge", "GroupGetLatencyByStoreTime",
           _GROUP_NUMS),
    Family("rocketmq_consumer_tps", "gauge", "GroupGetNums", _GROUP_NUMS),
    Family("rocketmq_producer_offset", "gauge", "TopicOffset", _TOPIC),
    Family("rocketmq_topic_retry_offset", "gauge", "TopicRetryOffset", _TOPIC),
    Family("rocketmq_topic_dlq_offset", "gauge", "TopicRetryOffset",
           ("cluster", "broker", "group")),
    Family("rocketmq_producer_tps", "gauge", "TopicPutNums", _TOPIC),
    Family("rocketmq_broker_commitlog_diff", "gauge", "brokerCommitLogDiffGauge",
           ("cluster", "brokerIP", "broker")),
    Family("rocketmq_brokeruntime_commitlog_disk_ratio", "gauge",
           "brokerRuntimeCommitLogDiskRatio", _RUNTIME),
    Family("rocketmq_brokeruntime_consumequeue_disk_ratio", "gauge",
           "brokerRuntimeConsumeQueueDiskRatio", _RUNTIME),
    Family("rocketmq_brokeruntime_commitlog_maxoffset", "gauge",
           "brokerRuntimeCommitLogMaxOffset", _RUNTIME),
    Family("rocketmq_brokeruntime_commitlog_minoffset", "gauge",
           "brokerRuntimeCommitLogMinOffset", _RUNTIME),
)

_G = ("cluster", "group")
#: The in-flight and ready split is per topic and broker, as the brokers' own
#: rocketmq_consumer_inflight_messages and rocketmq_consumer_ready_messages (5.x) are.
_TOPIC_GROUP = ("cluster", "group", "topic", "broker")
#: What only the collector knows; ``cluster`` is the collector's name (its --name).
OURS = (
    Family("rocketmq_lag_messages", "gauge",
           "Messages the group has not consumed yet, all its queues together.", _G),
    Family("rocketmq_lag_seconds", "gauge",
           "Time lag: age of the group's oldest unconsumed message (seconds).", _G),
    Family("rocketmq_lag_inflight_messages", "gauge",
           "Of the lag, messages POP consumers took and have not acked yet (0 for push "
           "and pull groups).", _TOPIC_GROUP),
    Family("rocketmq_lag_ready_messages", "gauge",
           "Of the lag, messages no consumer has taken yet.", _TOPIC_GROUP),
    Family("rocketmq_lag_verdict", "gauge",
           "1 for the group's verdict: verdict is its worst queue's (OK, UNKNOWN, WARNING, "
           "STALL, REWIND, STOP), status the group's (OK, UNKNOWN, WARNING, ERROR), rule "
           "the rule that fired.", ("cluster", "group", "verdict", "status", "rule")),
    Family("rocketmq_lag_severity", "gauge",
           "The group's worst queue verdict as a number: 0 OK, 1 UNKNOWN, 2 WARNING, "
           "3 STALL, 4 REWIND, 5 STOP.", _G),
    Family("rocketmq_lag_drain_rate", "gauge",
           "Messages per second the group's lag falls by over the window (negative: it "
           "grows).", _G),
    Family("rocketmq_lag_eta_seconds", "gauge",
           "Seconds until the group catches up at the current rate (0 caught up or "
           "keeping up, +Inf never).", _G),
    Family("rocketmq_lag_retention_risk_messages", "gauge",
           "Unconsumed messages the broker will delete before the group reads them.", _G),
    Family("rocketmq_lag_retention_risk_seconds", "gauge",
           "Seconds until the broker deletes the first of the group's unread messages "
           "(groups at risk only).", _G),
    Family("rocketmq_lag_dead_letters", "gauge",
           "Messages stored in the group's dead-letter topic (%DLQ%group).", _G),
    Family("rocketmq_lag_dead_letters_unhandled", "gauge",
           "Dead letters neither resent nor discarded (mqadmin dlq resend/discard).", _G),
    Family("rocketmq_lag_broker_slaves", "gauge",
           "Slaves the name servers list for a broker name.", ("cluster", "broker")),
    Family("rocketmq_lag_allowed_messages", "gauge",
           "The lag at or below which a queue is OK (the collector's --allowed-lag).",
           ("cluster",)),
    Family("rocketmq_lag_cycle_timestamp_seconds", "gauge",
           "When the latest cycle sampled the cluster (Unix time).", ("cluster",)),
    Family("rocketmq_lag_cycle_duration_seconds", "gauge",
           "How long the latest cycle's sampling took.", ("cluster",)),
    Family("rocketmq_lag_gaps", "gauge",
           "Group x broker pairs the latest cycle could not sample.", ("cluster",)),
    Family("rocketmq_lag_cycles", "counter", "Cycles the collector has run.", ("cluster",)),
)
FAMILIES = EXPORTER + OURS


class _Out:
    """The families of one scrape, filled by name."""

    def __init__(self) -> None:
        self.metrics: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
            f.name: (GaugeMetricFamily(f.name, f.help, labels=f.labels) if f.kind == "gauge"
                     else CounterMetricFamily(f.name, f.help, labels=f.labels))
            for f in FAMILIES}

    def add(self, name: str, labels: Sequence[str], value: float) -> None:
        self.metrics[name].add_metric(labels, value)


def _diff_family(topic: str) -> str:
    if topic.startswith(RETRY_PREFIX):
        return "rocketmq_group_retrydiff"
    if topic.startswith(DLQ_PREFIX):
        return "rocketmq_group_dlqdiff"
    return "rocketmq_group_diff"


class LagMetrics(Collector):
    """``registry.register(LagMetrics(lambda: collector.latest))``."""

    def __init__(self, source: Callable[[], Latest | None]) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        out = _Out()
        latest = self.source()
        if latest is not None:
            _exporter(out, latest)
            _ours(out, latest)
        yield from out.metrics.values()


def _exporter(out: _Out, latest: Latest) -> None:
    extras = latest.extras
    clusters = {n.broker: n.cluster for n in extras.nodes}
    default = latest.cycle.cluster
    diff: dict[tuple[str, str, str], int] = {}
    per_group: dict[tuple[str, str, str], list[float]] = {}  # offset, latency, tps
    queues: dict[tuple[str, str, int], tuple[int, float | None]] = {}
    for s in latest.cycle.samples:
        key = (_diff_family(s.topic), s.group, s.topic)
        diff[key] = diff.get(key, 0) + s.lag
        g = per_group.setdefault((s.broker, s.topic, s.group), [0.0, -1.0, 0.0])
        g[0] += s.consumer_offset
        if s.lag_ms is not None:
            g[1] = max(g[1], s.lag_ms)
        if s.consume_rate is not None:
            g[2] += s.consume_rate
        q = (s.broker, s.topic, s.queue_id)
        held = queues.get(q)
        queues[q] = ((s.broker_offset, s.produce_rate) if held is None else
                     (max(held[0], s.broker_offset),
                      held[1] if held[1] is not None else s.produce_rate))
    consumers = extras.consumers
    for (name, group, topic), lag in diff.items():
        c = consumers.get(group)
        if c is not None and c.model is MessageModel.BROADCASTING:
            continue  # as rocketmq-exporter: broadcast groups keep their offsets locally
        online = str(len(c.client_ids)) if c is not None else "0"
        model = str((c.model if c is not None else MessageModel.CLUSTERING).value)
        out.add(name, (group, topic, online, model), lag)
    for c in consumers.values():
        out.add("rocketmq_group_count",
                (",".join(c.client_addrs), ",".join(c.client_ids), c.group), len(c.client_ids))
    for (broker, topic, group), (offset, latency, tps) in per_group.items():
        labels = (clusters.get(broker, default), broker, topic, group)
        out.add("rocketmq_consumer_offset", labels, offset)
        if latency >= 0:
            out.add("rocketmq_group_get_latency_by_storetime", labels, latency)
        out.add("rocketmq_consumer_tps", labels, tps)
    topics: dict[tuple[str, str], list[float]] = {}
    for (broker, topic, _), (offset, rate) in queues.items():
        t = topics.setdefault((broker, topic), [0.0, 0.0])
        t[0] += offset
        t[1] += rate or 0.0
    for (broker, topic), (offset, rate) in topics.items():
        where = (clusters.get(broker, default), broker, topic)
        if topic.startswith(RETRY_PREFIX):
            out.add("rocketmq_topic_retry_offset", where, offset)
        elif not topic.startswith(DLQ_PREFIX):
            out.add("rocketmq_producer_offset", where, offset)
            out.add("rocketmq_producer_tps", where, rate)
    for d in extras.dead_letters:
        out.add("rocketmq_topic_dlq_offset", (d.cluster or default, d.broker, d.group),
                d.max_offset)
    _brokers(out, latest)


def _brokers(out: _Out, latest: Latest) -> None:
    nodes = latest.extras.nodes
    masters = {n.broker: n for n in nodes if n.broker_id == MASTER_ID}
    for n in nodes:
        master = masters.get(n.broker)
        if n.broker_id != MASTER_ID:
            top, mine = (master.number("commitLogMaxOffset") if master else None,
                         n.number("commitLogMaxOffset"))
            if top is not None and mine is not None:
                out.add("rocketmq_broker_commitlog_diff", (n.cluster, n.addr, n.broker),
                        top - mine)
            continue
        labels = (n.cluster, n.addr, "", n.runtime.get("brokerVersionDesc", ""),
                  n.runtime.get("bootTimestamp", ""), n.runtime.get("brokerVersion", ""))
        for name, key in (("rocketmq_brokeruntime_commitlog_disk_ratio", "commitLogDiskRatio"),
                          ("rocketmq_brokeruntime_consumequeue_disk_ratio",
                           "consumeQueueDiskRatio"),
                          ("rocketmq_brokeruntime_commitlog_maxoffset", "commitLogMaxOffset"),
                          ("rocketmq_brokeruntime_commitlog_minoffset", "commitLogMinOffset")):
            value = n.number(key)
            if value is not None:
                out.add(name, labels, value)


def _ours(out: _Out, latest: Latest) -> None:
    cluster = latest.cycle.cluster
    report = latest.report
    for g in report.groups:
        v = g.verdict
        labels = (cluster, v.group)
        worst = v.worst.status if v.worst is not None else Status.OK
        out.add("rocketmq_lag_messages", labels, v.lag)
        if v.lag_ms is not None:
            out.add("rocketmq_lag_seconds", labels, v.lag_ms / 1000)
        out.add("rocketmq_lag_verdict", (cluster, v.group, worst.value, v.status.value,
                                         v.worst.rule_id.value if v.worst else ""), 1)
        out.add("rocketmq_lag_severity", labels, SEVERITY[worst])
        if v.drain_rate is not None:
            out.add("rocketmq_lag_drain_rate", labels, v.drain_rate)
        eta = v.eta_s if v.eta_s is not None else (0.0 if v.keeping_up else math.inf)
        out.add("rocketmq_lag_eta_seconds", labels, eta)
        out.add("rocketmq_lag_retention_risk_messages", labels, g.risk_messages)
        if g.risks:
            first = min(r.deletes_at_ms for r in g.risks)
            out.add("rocketmq_lag_retention_risk_seconds", labels,
                    max(first - report.ts, 0) / 1000)
    split: dict[tuple[str, str, str], list[int]] = {}  # in flight, ready
    for s in latest.cycle.samples:
        t = split.setdefault((s.group, s.topic, s.broker), [0, 0])
        t[0] += s.in_flight
        t[1] += s.ready
    for (group, topic, broker), (in_flight, ready) in sorted(split.items()):
        out.add("rocketmq_lag_inflight_messages", (cluster, group, topic, broker), in_flight)
        out.add("rocketmq_lag_ready_messages", (cluster, group, topic, broker), ready)
    letters: dict[str, list[int]] = {}
    for d in latest.extras.dead_letters:
        t = letters.setdefault(d.group, [0, 0])
        t[0] += d.stored
        t[1] += d.unhandled
    for group, (stored, unhandled) in sorted(letters.items()):
        out.add("rocketmq_lag_dead_letters", (cluster, group), stored)
        out.add("rocketmq_lag_dead_letters_unhandled", (cluster, group), unhandled)
    slaves: dict[str, int] = {}
    for n in latest.extras.nodes:
        slaves[n.broker] = slaves.get(n.broker, 0) + (n.broker_id != MASTER_ID)
    for broker, count in sorted(slaves.items()):
        out.add("rocketmq_lag_broker_slaves", (cluster, broker), count)
    cycle = latest.cycle
    out.add("rocketmq_lag_allowed_messages", (cluster,), latest.allowed_lag)
    out.add("rocketmq_lag_cycle_timestamp_seconds", (cluster,), cycle.ts / 1000)
    out.add("rocketmq_lag_cycle_duration_seconds", (cluster,), cycle.duration_ms / 1000)
    out.add("rocketmq_lag_gaps", (cluster,), len(cycle.gaps))
    out.add("rocketmq_lag_cycles", (cluster,), latest.cycles)


class MetricsServer:
    """/metrics over HTTP, from prometheus_client's server in a thread of its own:
    ``server = MetricsServer(source, host, port); server.start(); ...; server.stop()``."""

    def __init__(self, source: Callable[[], Latest | None], host: str = "0.0.0.0",
                 port: int = 0) -> None:
        self.host = host
        self.requested_port = port
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(LagMetrics(source))
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port it listens on (the one picked for port 0)."""
        return self._server.server_port if self._server is not None else self.requested_port

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/metrics"

    def start(self) -> None:
        """Listen now.

        Raises:
            OSError: the port is in use or the host is not this machine's.
        """
        self._server, self._thread = start_wsgi_server(self.requested_port, self.host,
                                                       self.registry)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

"""`BrokerCollector`: the broker's figures as Prometheus metrics, read when /metrics is asked.

How this works (conventions item 25): nothing is pushed from the send or pull path.  At each
scrape the collector reads what the broker keeps anyway (the stats manager's put/get totals
and message size buckets, the topic, group, client and offset tables, the store's offsets and
the HA connections) and builds 5.3's metric families from them.  Every sample carries 5.3's
node labels (cluster, node_type="broker", node_id=brokerName).  Retry and DLQ topics are left
out of messages/throughput in and out, as 5.3 does.  Names: `engine.broker.metrics.names`.

A large broker has some 20,000 samples, so the big families (topics, group-topic pairs) are
built lean: their samples are appended to the family directly, with label dicts made once per
series and cached between scrapes (`ScrapeCache`, shared by the families of one series), and
the store time of a consumer's next message is read once per committed offset.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    Sample,
)
from prometheus_client.registry import Collector

from engine.broker.metrics import names as n
from engine.broker.metrics.lag import group_lags
from engine.broker.metrics.rpc import BOUNDS, RpcLatency, request_code_name, response_code_name
from engine.broker.metrics.scrape_cache import ScrapeCache
from engine.broker.state import BrokerState
from engine.broker.stats import (
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    SIZE_BUCKETS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    TRANS_COMMIT,
    TRANS_HALF_PUT,
    TRANS_ROLLBACK,
)
from engine.broker.topics import DLQ_PREFIX, RETRY_PREFIX
from engine.protocol.codes import LanguageCode
from engine.protocol.version import version_desc

_BOUNDS = (*(str(float(b)) for b in SIZE_BUCKETS), "+Inf")
_RPC_BOUNDS = (*(str(float(b)) for b in BOUNDS), "+Inf")
# sample names as prometheus_client's families name them
_MESSAGES_IN = n.MESSAGES_IN + "_total"
_THROUGHPUT_IN = n.THROUGHPUT_IN + "_total"
_MESSAGES_OUT = n.MESSAGES_OUT + "_total"
_THROUGHPUT_OUT = n.THROUGHPUT_OUT + "_total"
_SIZE_BUCKET = n.MESSAGE_SIZE + "_bucket"
_SIZE_COUNT = n.MESSAGE_SIZE + "_count"
_SIZE_SUM = n.MESSAGE_SIZE + "_sum"

#: label values of a series, node labels first
Node = tuple[str, ...]
Labels = dict[str, str]


@dataclass(frozen=True, slots=True)
class _LabelNames:
    names: tuple[str, ...]

    def of(self, values: Node) -> Labels:
        # in name order: the writer sorts every sample's labels, which is cheapest when sorted
        return dict(sorted(zip(self.names, values, strict=True)))


_IN_LABELS = _LabelNames((*n.NODE_LABELS, n.TOPIC, n.MESSAGE_TYPE, n.IS_SYSTEM))
_OUT_LABELS = _LabelNames((*n.NODE_LABELS, n.TOPIC, n.CONSUMER_GROUP, n.IS_SYSTEM))
_LAG_LABELS = _LabelNames((*n.NODE_LABELS, n.CONSUMER_GROUP, n.TOPIC, n.IS_RETRY, n.IS_SYSTEM))


@dataclass(frozen=True, slots=True)
class _InSeries:
    """The label dicts of one topic's messages in, throughput in and size histogram."""

    labels: Labels
    buckets: tuple[Labels, ...]  # the histogram's, one per bound ("le")

    @staticmethod
    def of(values: Node) -> _InSeries:
        labels = _IN_LABELS.of(values)
        return _InSeries(labels, tuple(dict(sorted({**labels, "le": bound}.items()))
                                       for bound in _BOUNDS))


def _retry_or_dlq(topic: str) -> bool:
    return topic.startswith(RETRY_PREFIX) or topic.startswith(DLQ_PREFIX)


def _language(code: int) -> str:
    try:
        return LanguageCode(code).name.lower()
    except ValueError:
        return str(code)


class BrokerCollector(Collector):
    """Reads one broker's state at scrape time."""

    def __init__(self, state: BrokerState, rpc: RpcLatency | None = None) -> None:
        self.state = state
        self.rpc = rpc if rpc is not None else RpcLatency()
        # what one scrape derives per series, cached for the next (see `ScrapeCache`)
        self._in_series: ScrapeCache[Node, _InSeries] = ScrapeCache(_InSeries.of)
        self._out_labels: ScrapeCache[Node, Labels] = ScrapeCache(_OUT_LABELS.of)
        self._lag_labels: ScrapeCache[Node, Labels] = ScrapeCache(_LAG_LABELS.of)
        self._stamps: ScrapeCache[tuple[str, int, int], int] = ScrapeCache(
            lambda key: state.store.get_message_store_timestamp(*key))
        self._caches: tuple[ScrapeCache[Any, Any], ...] = (
            self._in_series, self._out_labels, self._lag_labels, self._stamps)

    def _node(self) -> Node:
        cfg = self.state.config
        return cfg.broker_cluster_name, n.NODE_TYPE_BROKER, cfg.broker_name

    def collect(self) -> Iterator[Metric]:
        node = self._node()
        yield from self._broker(node)
        yield from self._traffic(node)
        yield from self._connections(node)
        yield from self._lag(node)
        yield from self._transactions(node)
        yield from self._storage(node)
        yield from self._replication(node)
        yield from self._timers(node)
        yield self._rpc_latency(node)
        for cache in self._caches:
            cache.end_scrape()

    # ------------------------------------------------------------------ families

    def _broker(self, node: Node) -> Iterator[Metric]:
        st = self.state
        for name, doc, value in (
                (n.BROKER_PERMISSION, "Broker permission", st.config.broker_permission),
                (n.TOPIC_NUMBER, "Active topic number", len(st.topics.table)),
                (n.CONSUMER_GROUP_NUMBER, "Active subscription group number",
                 len(st.groups.table))):
            family = GaugeMetricFamily(name, doc, labels=n.NODE_LABELS)
            family.add_metric(node, value)
            yield family

    def _traffic(self, node: Node) -> Iterator[Metric]:
        st = self.state
        stats = st.stats
        in_labels = (*n.NODE_LABELS, n.TOPIC, n.MESSAGE_TYPE, n.IS_SYSTEM)
        msgs_in = CounterMetricFamily(n.MESSAGES_IN, "Total number of incoming messages",
                                      labels=in_labels)
        bytes_in = CounterMetricFamily(n.THROUGHPUT_IN, "Total traffic of incoming messages",
                                       labels=in_labels)
        sizes = HistogramMetricFamily(n.MESSAGE_SIZE, "Incoming messages size",
                                      labels=in_labels)
        add_in, add_bytes, add_size = (msgs_in.samples.append, bytes_in.samples.append,
                                       sizes.samples.append)
        # 5.x refuses normal sends to a TRANSACTION topic: a topic with half messages is one.
        transactional = stats.sets.get(TRANS_HALF_PUT, {})
        put_nums = stats.sets.get(TOPIC_PUT_NUMS, {})
        put_size = stats.sets.get(TOPIC_PUT_SIZE, {})
        is_system = st.topics.is_system_topic
        series_of = self._in_series.get
        for topic in stats.put_topics():
            if _retry_or_dlq(topic):
                continue
            kind = "transaction" if topic in transactional else "normal"
            series = series_of((*node, topic, kind, n.flag(is_system(topic))))
            labels = series.labels
            nums, size = put_nums.get(topic), put_size.get(topic)
            add_in(Sample(_MESSAGES_IN, labels, nums.total if nums is not None else 0))
            add_bytes(Sample(_THROUGHPUT_IN, labels, size.total if size is not None else 0))
            histogram = stats.size_histogram(topic)
            if histogram is not None:
                cumulative = 0
                for bucket, count in zip(series.buckets, histogram[:-1], strict=True):
                    cumulative += count
                    add_size(Sample(_SIZE_BUCKET, bucket, cumulative))
                add_size(Sample(_SIZE_COUNT, labels, cumulative))
                add_size(Sample(_SIZE_SUM, labels, histogram[-1]))
        yield from (msgs_in, bytes_in, sizes)

        out_labels = (*n.NODE_LABELS, n.TOPIC, n.CONSUMER_GROUP, n.IS_SYSTEM)
        msgs_out = CounterMetricFamily(n.MESSAGES_OUT, "Total number of outgoing messages",
                                       labels=out_labels)
        bytes_out = CounterMetricFamily(n.THROUGHPUT_OUT, "Total traffic of outgoing messages",
                                        labels=out_labels)
        add_out, add_out_bytes = msgs_out.samples.append, bytes_out.samples.append
        labels_of = self._out_labels.get
        get_sizes = stats.sets.get(GROUP_GET_SIZE, {})
        for key, counter in list(stats.sets.get(GROUP_GET_NUMS, {}).items()):
            topic, _, group = key.partition("@")
            if _retry_or_dlq(topic):
                continue
            system = is_system(topic) or n.is_system_group(group)
            labels = labels_of((*node, topic, group, n.flag(system)))
            add_out(Sample(_MESSAGES_OUT, labels, counter.total))
            size = get_sizes.get(key)
            add_out_bytes(Sample(_THROUGHPUT_OUT, labels, size.total if size is not None else 0))
        yield from (msgs_out, bytes_out)

        dlq = CounterMetricFamily(n.SEND_TO_DLQ_MESSAGES, "Consumer send to DLQ messages",
                                  labels=(*n.NODE_LABELS, n.CONSUMER_GROUP, n.TOPIC, n.IS_SYSTEM))
        for topic, counter in list(put_nums.items()):
            if topic.startswith(DLQ_PREFIX):
                group = topic[len(DLQ_PREFIX):]
                dlq.add_metric([*node, group, topic, n.flag(n.is_system_group(group))],
                               counter.total)
        yield dlq

    def _connections(self, node: Node) -> Iterator[Metric]:
        st = self.state
        producers: Counter[tuple[str, str]] = Counter()
        for channels in st.producers.groups.values():
            for ch in channels.values():
                producers[(_language(ch.language), version_desc(ch.version).lower())] += 1
        family = GaugeMetricFamily(n.PRODUCER_CONNECTIONS, "Producer connections",
                                   labels=(*n.NODE_LABELS, n.LANGUAGE, n.VERSION, n.PROTOCOL_TYPE))
        for (language, version), count in producers.items():
            family.add_metric([*node, language, version, n.PROTOCOL_TYPE_REMOTING], count)
        yield family

        consumers: Counter[tuple[str, str, str, str]] = Counter()
        for group, info in st.consumers.groups.items():
            mode = info.consume_type.type_cn.lower()
            for ch in info.channels.values():
                consumers[(group, _language(ch.language), version_desc(ch.version).lower(),
                           mode)] += 1
        family = GaugeMetricFamily(
            n.CONSUMER_CONNECTIONS, "Consumer connections",
            labels=(*n.NODE_LABELS, n.CONSUMER_GROUP, n.LANGUAGE, n.VERSION, n.CONSUME_MODE,
                    n.PROTOCOL_TYPE, n.IS_SYSTEM))
        for (group, language, version, mode), count in consumers.items():
            family.add_metric([*node, group, language, version, mode, n.PROTOCOL_TYPE_REMOTING,
                               n.flag(n.is_system_group(group))], count)
        yield family

    def _lag(self, node: Node) -> Iterator[Metric]:
        st = self.state
        labels = (*n.NODE_LABELS, n.CONSUMER_GROUP, n.TOPIC, n.IS_RETRY, n.IS_SYSTEM)
        lag = GaugeMetricFamily(n.CONSUMER_LAG_MESSAGES, "Consumer lag messages", labels=labels)
        latency = GaugeMetricFamily(n.CONSUMER_LAG_LATENCY, "Consumer lag time", labels=labels)
        inflight = GaugeMetricFamily(n.CONSUMER_INFLIGHT_MESSAGES, "Consumer inflight messages",
                                     labels=labels)
        queueing = GaugeMetricFamily(n.CONSUMER_QUEUEING_LATENCY, "Consumer queueing time",
                                     labels=labels)
        ready = GaugeMetricFamily(n.CONSUMER_READY_MESSAGES, "Consumer ready messages",
                                  labels=labels)
        add_lag, add_latency, add_inflight, add_queueing, add_ready = (
            f.samples.append for f in (lag, latency, inflight, queueing, ready))
        labels_of = self._lag_labels.get
        is_system = st.topics.is_system_topic
        online = st.consumers.groups
        now = st.clock()
        for g in group_lags(st, self._stamp_of):
            system = is_system(g.topic) or n.is_system_group(g.group)
            values = labels_of((*node, g.group, g.topic, n.flag(g.is_retry), n.flag(system)))
            waited = now - g.earliest_unconsumed_ms if g.earliest_unconsumed_ms else 0
            add_lag(Sample(n.CONSUMER_LAG_MESSAGES, values, g.lag))
            add_latency(Sample(n.CONSUMER_LAG_LATENCY, values, waited))
            # 5.3 reports a group only while it has consumers online; its lag and latency
            # are kept here for a group without any (one that stopped is the one to see),
            # what it is consuming (in flight, ready, queueing) is not.
            # A POP group (5.x clients, through a proxy) need not heartbeat this broker:
            # messages in flight show it is consuming.
            if g.group in online or g.inflight:
                add_inflight(Sample(n.CONSUMER_INFLIGHT_MESSAGES, values, g.inflight))
                add_queueing(Sample(n.CONSUMER_QUEUEING_LATENCY, values, waited))
                add_ready(Sample(n.CONSUMER_READY_MESSAGES, values, g.ready))
        yield from (lag, latency, inflight, queueing, ready)

    def _stamp_of(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of a message, read once while it is in the store (it never changes)."""
        if offset < self.state.store.get_min_offset_in_queue(topic, queue_id):
            return -1
        return self._stamps.get((topic, queue_id, offset))

    def _transactions(self, node: Node) -> Iterator[Metric]:
        stats = self.state.stats
        labels = (*n.NODE_LABELS, n.TOPIC)
        commits = CounterMetricFamily(n.COMMIT_MESSAGES, "Total number of commit messages",
                                      labels=labels)
        rollbacks = CounterMetricFamily(n.ROLLBACK_MESSAGES, "Total number of rollback messages",
                                        labels=labels)
        half = GaugeMetricFamily(n.HALF_MESSAGES, "Half messages of all topics", labels=labels)
        committed = stats.sets.get(TRANS_COMMIT, {})
        rolled_back = stats.sets.get(TRANS_ROLLBACK, {})
        for topic, counter in list(committed.items()):
            commits.add_metric([*node, topic], counter.total)
        for topic, counter in list(rolled_back.items()):
            rollbacks.add_metric([*node, topic], counter.total)
        for topic, counter in list(stats.sets.get(TRANS_HALF_PUT, {}).items()):
            ended = sum(c.total for c in (committed.get(topic), rolled_back.get(topic)) if c)
            half.add_metric([*node, topic], max(counter.total - ended, 0))
        yield from (commits, rollbacks, half)

    def _storage(self, node: Node) -> Iterator[Metric]:
        st = self.state
        store = st.store
        labels = [*node, *n.STORAGE_VALUES]
        try:
            usage = shutil.disk_usage(st.store_config.store_path_root_dir)
        except OSError:
            usage = None
        if usage is not None and usage.total > 0:
            family = GaugeMetricFamily(n.STORAGE_SIZE, "Broker storage size",
                                       labels=n.STORAGE_LABELS)
            family.add_metric(labels, usage.total - usage.free)
            yield family
        for name, doc, value in (
                (n.STORAGE_FLUSH_BEHIND, "Broker flush behind bytes", store.flush_behind_bytes()),
                (n.STORAGE_DISPATCH_BEHIND, "Broker dispatch behind bytes",
                 store.dispatch_behind_bytes())):
            family = GaugeMetricFamily(name, doc, labels=n.STORAGE_LABELS)
            family.add_metric(labels, value)
            yield family
        earliest = store.get_earliest_message_time()
        if earliest > 0:
            family = GaugeMetricFamily(n.STORAGE_MESSAGE_RESERVE_TIME,
                                       "Broker message reserve time", labels=n.STORAGE_LABELS)
            family.add_metric(labels, max(st.clock() - earliest, 0))
            yield family

    def _replication(self, node: Node) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            n.HA_SLAVE_FALL_BEHIND, "Commit-log bytes a slave has not acknowledged",
            labels=(*n.NODE_LABELS, n.SLAVE_ADDR))
        ha = self.state.ha
        if ha is not None:
            for info in ha.connection_infos():
                family.add_metric([*node, info.addr], info.diff)
        yield family

    def _timers(self, node: Node) -> Iterator[Metric]:
        """5.3's timer gauges and counters (only with timerWheelEnable, as there)."""
        st = self.state
        timers = st.store.timer
        if not timers.enabled:
            return
        now = st.clock()
        for name, doc, value in (
                (n.TIMER_ENQUEUE_LAG, "Timer enqueue messages lag",
                 timers.enqueue_behind_messages()),
                (n.TIMER_ENQUEUE_LATENCY, "Timer enqueue latency", timers.enqueue_behind_ms(now)),
                (n.TIMER_DEQUEUE_LAG, "Timer dequeue messages lag", timers.congest_num_total()),
                (n.TIMER_DEQUEUE_LATENCY, "Timer dequeue latency",
                 timers.dequeue_behind_ms(now))):
            family = GaugeMetricFamily(name, doc, labels=n.NODE_LABELS)
            family.add_metric(node, value)
            yield family
        labels = (*n.NODE_LABELS, n.TOPIC)
        for name, doc, table in (
                (n.TIMER_ENQUEUE_TOTAL, "Total number of timer enqueue", timers.put_by_topic),
                (n.TIMER_DEQUEUE_TOTAL, "Total number of timer dequeue",
                 timers.dequeue_by_topic)):
            counter = CounterMetricFamily(name, doc, labels=labels)
            for topic, total in list(table.items()):
                counter.add_metric([*node, topic], total)
            yield counter

    def _rpc_latency(self, node: Node) -> Metric:
        family = HistogramMetricFamily(
            n.RPC_LATENCY, "Rpc latency",
            labels=(*n.NODE_LABELS, n.PROTOCOL_TYPE, n.REQUEST_CODE, n.RESPONSE_CODE,
                    n.IS_LONG_POLLING, n.RESULT))
        for (request, response, long_polling, result), counts in list(self.rpc.table.items()):
            cumulative, buckets = 0, []
            for bound, count in zip(_RPC_BOUNDS, counts[:-1], strict=True):
                cumulative += count
                buckets.append((bound, float(cumulative)))
            family.add_metric([*node, n.PROTOCOL_TYPE_REMOTING, request_code_name(request),
                               response_code_name(response), n.flag(long_polling), result],
                              buckets, float(counts[-1]))
        return family

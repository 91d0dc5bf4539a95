"""Metric and label names of Apache RocketMQ 5.3, as its Prometheus exporter writes them.

How this works: 5.3 names its instruments in `BrokerMetricsConstant`, `RemotingMetricsConstant`
and `DefaultStoreMetricsConstant` and exports them through OpenTelemetry's Prometheus exporter
(1.29), which appends the instrument's unit unless the name already holds it ("milliseconds",
"ms" -> "_milliseconds", "bytes" -> "_bytes") and `_total` to counters without "total".  The
names below are the results, so dashboards written for a 5.3 broker work unchanged.
prometheus_client adds `_total` to counters and `_bucket/_sum/_count` to histograms itself, so
counters are declared here without `_total`.
"""

from __future__ import annotations

# ------------------------------------------------------------------ BrokerMetricsConstant
BROKER_PERMISSION = "rocketmq_broker_permission"
TOPIC_NUMBER = "rocketmq_topic_number"
CONSUMER_GROUP_NUMBER = "rocketmq_consumer_group_number"
MESSAGES_IN = "rocketmq_messages_in"  # counter: rocketmq_messages_in_total
MESSAGES_OUT = "rocketmq_messages_out"
THROUGHPUT_IN = "rocketmq_throughput_in"
THROUGHPUT_OUT = "rocketmq_throughput_out"
MESSAGE_SIZE = "rocketmq_message_size"  # histogram without a unit
PRODUCER_CONNECTIONS = "rocketmq_producer_connections"
CONSUMER_CONNECTIONS = "rocketmq_consumer_connections"
CONSUMER_LAG_MESSAGES = "rocketmq_consumer_lag_messages"
CONSUMER_LAG_LATENCY = "rocketmq_consumer_lag_latency_milliseconds"  # unit "milliseconds"
CONSUMER_INFLIGHT_MESSAGES = "rocketmq_consumer_inflight_messages"
CONSUMER_QUEUEING_LATENCY = "rocketmq_consumer_queueing_latency_milliseconds"
CONSUMER_READY_MESSAGES = "rocketmq_consumer_ready_messages"
SEND_TO_DLQ_MESSAGES = "rocketmq_send_to_dlq_messages"  # counter: ..._total
COMMIT_MESSAGES = "rocketmq_commit_messages"  # counter: rocketmq_commit_messages_total
ROLLBACK_MESSAGES = "rocketmq_rollback_messages"
HALF_MESSAGES = "rocketmq_half_messages"
# ------------------------------------------------------------------ DefaultStoreMetricsConstant
STORAGE_SIZE = "rocketmq_storage_size_bytes"  # unit "bytes"
STORAGE_FLUSH_BEHIND = "rocketmq_storage_flush_behind_bytes"  # name holds the unit already
STORAGE_DISPATCH_BEHIND = "rocketmq_storage_dispatch_behind_bytes"
STORAGE_MESSAGE_RESERVE_TIME = "rocketmq_storage_message_reserve_time_milliseconds"
# timer messages (DefaultStoreMetricsConstant; the latencies have unit "milliseconds")
TIMER_ENQUEUE_LAG = "rocketmq_timer_enqueue_lag"
TIMER_ENQUEUE_LATENCY = "rocketmq_timer_enqueue_latency_milliseconds"
TIMER_DEQUEUE_LAG = "rocketmq_timer_dequeue_lag"
TIMER_DEQUEUE_LATENCY = "rocketmq_timer_dequeue_latency_milliseconds"
TIMER_ENQUEUE_TOTAL = "rocketmq_timer_enqueue"  # counter: rocketmq_timer_enqueue_total
TIMER_DEQUEUE_TOTAL = "rocketmq_timer_dequeue"  # counter: rocketmq_timer_dequeue_total
# ------------------------------------------------------------------ RemotingMetricsConstant
RPC_LATENCY = "rocketmq_rpc_latency_milliseconds"  # histogram, unit "milliseconds"
# ------------------------------------------------------------------ this engine (no 5.3 metric)
HA_SLAVE_FALL_BEHIND = "rocketmq_ha_slave_fall_behind_bytes"

# ------------------------------------------------------------------ labels
CLUSTER = "cluster"
NODE_TYPE = "node_type"
NODE_ID = "node_id"
NODE_TYPE_BROKER = "broker"
TOPIC = "topic"
CONSUMER_GROUP = "consumer_group"
IS_RETRY = "is_retry"
IS_SYSTEM = "is_system"
MESSAGE_TYPE = "message_type"
LANGUAGE = "language"
VERSION = "version"
CONSUME_MODE = "consume_mode"
PROTOCOL_TYPE = "protocol_type"
PROTOCOL_TYPE_REMOTING = "remoting"
STORAGE_TYPE = "storage_type"
STORAGE_MEDIUM = "storage_medium"
SLAVE_ADDR = "slave_addr"
REQUEST_CODE = "request_code"
RESPONSE_CODE = "response_code"
IS_LONG_POLLING = "is_long_polling"
RESULT = "result"

NODE_LABELS = (CLUSTER, NODE_TYPE, NODE_ID)
STORAGE_LABELS = (*NODE_LABELS, STORAGE_TYPE, STORAGE_MEDIUM)
STORAGE_VALUES = ("local", "disk")  # DefaultStoreMetricsConstant's defaults

#: 5.3's `MixAll.CID_RMQ_SYS_PREFIX`, lower-cased as `isSystemGroup` compares it.
SYSTEM_GROUP_PREFIX = "cid_rmq_sys_"


def flag(value: bool) -> str:
    """A boolean label as OpenTelemetry writes it."""
    return "true" if value else "false"


def is_system_group(group: str) -> bool:
    return group.lower().startswith(SYSTEM_GROUP_PREFIX)

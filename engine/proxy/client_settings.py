"""The settings a client is answered on Telemetry (5.3 `GrpcClientSettingsManager`), sans-IO.

How this works: the client announces its settings (type, access point, topics or group and
subscriptions, request timeout); the proxy answers them merged with its own.  A producer
gets the proxy's retry policy (grpcClientProducerMaxAttempts and the exponential backoff),
the maximum body size and whether message types are validated.  A consumer gets the long
polling batch size and timeout, FIFO when its group consumes orderly, and its group's retry
policy: maxAttempts = retryMaxTimes + 1 (the group's config, GET_SUBSCRIPTIONGROUP_CONFIG) and
the customized backoff of the delay levels (5.3's default retry policy of a group).
Everyone gets metrics off, unless metricCollectorMode says "proxy".
"""

from __future__ import annotations

import datetime

from engine.proxy.config import ProxyConfig
from engine.proxy.v2 import definition_pb2 as pb

#: SubscriptionGroupConfig defaults (5.3): retryMaxTimes, the CUSTOMIZED retry policy.
GROUP_RETRY_MAX_TIMES = 16


def _ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def merged(settings: pb.Settings, config: ProxyConfig, *, fifo: bool = False,
           retry_max_times: int = GROUP_RETRY_MAX_TIMES) -> pb.Settings:
    """The client's settings with the proxy's part filled in."""
    out = pb.Settings()
    out.CopyFrom(settings)
    if out.HasField("publishing"):
        backoff = out.backoff_policy
        backoff.max_attempts = config.grpc_client_producer_max_attempts
        exp = backoff.exponential_backoff
        exp.initial = _ms(config.grpc_client_producer_backoff_initial_millis)
        exp.max = _ms(config.grpc_client_producer_backoff_max_millis)
        exp.multiplier = float(config.grpc_client_producer_backoff_multiplier)
        out.publishing.validate_message_type = config.enable_topic_message_type_check
        out.publishing.max_body_size = config.max_message_size
    elif out.HasField("subscription"):
        sub = out.subscription
        sub.receive_batch_size = config.grpc_client_consumer_long_polling_batch_size
        sub.long_polling_timeout.FromMilliseconds(
            config.grpc_client_consumer_max_long_polling_timeout_millis)
        sub.fifo = fifo
        backoff = out.backoff_policy
        backoff.max_attempts = retry_max_times + 1
        backoff.ClearField("exponential_backoff")
        custom = backoff.customized_backoff
        del custom.next[:]
        for level_ms in config.delay_levels_ms():
            custom.next.add().FromMilliseconds(level_ms)
    metric = out.metric
    metric.Clear()
    if config.metric_collector_mode.lower() == "proxy":
        metric.on = True
        metric.endpoints.CopyFrom(settings.access_point)
    else:
        metric.on = False
    return out

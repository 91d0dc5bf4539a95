"""The proxy's settings: Apache 5.3's `rmq-proxy.json` keys, their defaults, and the loader.

How this works: `ProxyConfig` holds the keys this proxy acts on, named and defaulted as 5.3's
`ProxyConfig`; `load_proxy_config` reads the JSON object of an rmq-proxy.json, converts each
known key's value to its field's type (through `engine.common.config`, the broker's loader),
and returns the keys it did not act on in two lists: 5.3 keys this proxy does not use
(thread pools, metrics exporters, ...) and keys 5.3 does not know either (likely typos),
so the caller can warn about each kind.  A value of the wrong type is a `ConfigError` naming
the key.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from typing import Any

from engine.common import config as configlib

DEFAULT_CLUSTER_NAME = "DefaultCluster"
#: What may serve the gRPC port (`grpcFront`): our own HTTP/2, or grpcio's server.
FRONTS = ("h2", "grpcio")


class TlsMode(enum.Enum):
    """5.3's `tls.server.mode` (`TlsSystemConfig.tlsMode`), values as 5.3 spells them."""

    DISABLED = "disabled"  # plaintext only: a TLS handshake is refused
    PERMISSIVE = "permissive"  # TLS and plaintext clients on the same port
    ENFORCING = "enforcing"  # TLS only: a plaintext connection is refused


def parse_tls_mode(text: str) -> TlsMode:
    """A `tlsServerMode` value (case ignored).

    Raises:
        ConfigError: not one of disabled, permissive, enforcing.
    """
    try:
        return TlsMode(text.strip().lower())
    except ValueError:
        names = ", ".join(m.value for m in TlsMode)
        raise configlib.ConfigError(f"config key 'tlsServerMode': {text!r} is not one of "
                                    f"{names}", "tlsServerMode", text) from None


@dataclasses.dataclass(frozen=True, slots=True)
class ProxyConfig:
    """The keys of 5.3's ProxyConfig this proxy reads (same names, same defaults)."""

    cluster_name: str = configlib.config_key("rocketMQClusterName",
                                            DEFAULT_CLUSTER_NAME)
    proxy_mode: str = "cluster"
    namesrv_addr: str | None = None
    grpc_server_port: int = 8081
    #: The address the proxy advertises in routes ("" = the listen host, or this host's IP).
    local_serve_addr: str = ""
    grpc_shutdown_time_seconds: int = 30
    grpc_max_inbound_message_size: int = 130 * 1024 * 1024
    max_message_size: int = 4 * 1024 * 1024
    enable_message_body_empty_check: bool = True
    max_user_property_size: int = 16 * 1024
    user_property_max_num: int = 128
    max_message_group_size: int = 64
    default_invisible_time_mills: int = 60_000
    min_invisible_time_mills_for_recv: int = 10_000
    max_invisible_time_mills: int = 12 * 3600_000
    max_delay_time_mills: int = 24 * 3600_000
    max_transaction_recovery_second: int = 3600
    enable_topic_message_type_check: bool = True
    grpc_client_producer_max_attempts: int = 3
    grpc_client_producer_backoff_initial_millis: int = 10
    grpc_client_producer_backoff_max_millis: int = 1000
    grpc_client_producer_backoff_multiplier: int = 2
    grpc_client_consumer_min_long_polling_timeout_millis: int = 5_000
    grpc_client_consumer_max_long_polling_timeout_millis: int = 20_000
    grpc_client_consumer_long_polling_batch_size: int = 32
    grpc_client_idle_time_mills: int = 120_000
    grpc_proxy_relay_request_timeout_in_seconds: int = 5
    topic_route_service_cache_refresh_seconds: int = 20
    topic_config_cache_refresh_seconds: int = 20
    transaction_data_expire_millis: int = 30_000
    long_polling_reserve_time_in_millis: int = 100
    #: The entries of one AckMessage go to each broker as one BATCH_ACK_MESSAGE.
    enable_batch_ack: bool = False
    use_delay_level: bool = False
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    metric_collector_mode: str = "off"
    #: Access control (5.3 AuthConfig keys, read from the same file by the proxy).
    authentication_enabled: bool = False
    authorization_enabled: bool = False
    #: Where the users and ACLs are kept (the broker's layout); cluster mode only.
    auth_config_path: str | None = None
    #: {"accessKey","secretKey"}: signs the proxy's own requests to ACL-enabled brokers.
    inner_client_authentication_credentials: str | None = configlib.secret_key(
        "innerClientAuthenticationCredentials")
    #: 5.3's JVM property tls.server.mode: disabled, permissive or enforcing (see tls.py).
    tls_server_mode: str = "permissive"
    #: Serve a self-signed certificate made at start when no key and certificate files are set.
    tls_test_mode_enable: bool = True
    #: PEM private key and certificate chain of the gRPC port's TLS.
    tls_key_path: str = ""
    tls_cert_path: str = ""
    #: This engine's: the proxy's worker processes (workers.py); negative, one per core;
    #: 0, none (the proxy in the broker's or mqproxy's own process).
    proxy_workers: int = -1
    #: This engine's: what serves the gRPC port, "h2" (our own HTTP/2, engine/proxy/h2; a
    #: quarter of grpcio's CPU a call) or "grpcio" (grpcio's asyncio server).
    grpc_front: str = "h2"

    @property
    def tls_mode(self) -> TlsMode:
        """`tlsServerMode` (checked by `load_proxy_config`; see `parse_tls_mode`)."""
        return parse_tls_mode(self.tls_server_mode)

    @property
    def local_mode(self) -> bool:
        return self.proxy_mode.lower() == "local"

    def delay_levels_ms(self) -> list[int]:
        """`messageDelayLevel` as milliseconds, level 1 first."""
        units = {"s": 1000, "m": 60_000, "h": 3600_000, "d": 86400_000}
        return [int(item[:-1]) * units[item[-1]] for item in self.message_delay_level.split()]


#: Every key of 5.3's ProxyConfig (and AuthConfig's), so those this proxy ignores are told
#: apart from typos.
_APACHE_KEY_TEXT = """
    aclCacheExpiredSeconds aclCacheMaxNum aclCacheRefreshSeconds brokerConfigPath
    channelExpiredInSeconds channelExpiredTimeout consumerProcessorThreadPoolNums
    consumerProcessorThreadPoolQueueCapacity contextExpiredInSeconds
    defaultInvisibleTimeMills detectInterval detectTimeout enableAclRpcHookForClusterMode
    enableBatchAck enableGrpcEpoll enableMessageBodyEmptyCheck enablePrintJstack
    enableProxyAutoRenew enableRemotingLocalProxyGrpc enableTopicMessageTypeCheck
    grpcBossLoopNum grpcClientConsumerLongPollingBatchSize
    grpcClientConsumerMaxLongPollingTimeoutMillis
    grpcClientConsumerMinLongPollingTimeoutMillis grpcClientIdleTimeMills
    grpcClientManagerThreadPoolNums grpcClientManagerThreadQueueCapacity
    grpcClientProducerBackoffInitialMillis grpcClientProducerBackoffMaxMillis
    grpcClientProducerBackoffMultiplier grpcClientProducerMaxAttempts
    grpcConsumerThreadPoolNums grpcConsumerThreadQueueCapacity grpcMaxInboundMessageSize
    grpcProducerThreadPoolNums grpcProducerThreadQueueCapacity
    grpcProxyRelayRequestTimeoutInSeconds grpcRouteThreadPoolNums
    grpcRouteThreadQueueCapacity grpcServerPort grpcShutdownTimeSeconds grpcThreadPoolNums
    grpcThreadPoolQueueCapacity grpcTransactionThreadPoolNums
    grpcTransactionThreadQueueCapacity grpcWorkerLoopNum heartbeatSyncerThreadPoolNums
    heartbeatSyncerThreadPoolQueueCapacity heartbeatSyncerTopicClusterName
    heartbeatSyncerTopicName invisibleTimeMillisWhenClear localProxyConnectTimeoutMs
    localServeAddr lockTimeoutMsInHandleGroup longPollingReserveTimeInMillis
    maxDelayTimeMills maxInvisibleTimeMills maxMessageGroupSize maxMessageSize
    maxRenewRetryTimes maxTransactionRecoverySecond maxUserPropertySize messageDelayLevel
    metadataThreadPoolNums metadataThreadPoolQueueCapacity metricCollectorAddress
    metricCollectorMode metricGrpcExporterIntervalInMills metricGrpcExporterTimeOutInMills
    metricLoggingExporterIntervalInMills metricsExporterType metricsGrpcExporterHeader
    metricsGrpcExporterTarget metricsInDelta metricsLabel metricsPromExporterHost
    metricsPromExporterPort minInvisibleTimeMillsForRecv namesrvAddr namesrvDomain
    namesrvDomainSubgroup printJstackInMillis printThreadPoolStatusInMillis
    producerProcessorThreadPoolNums producerProcessorThreadPoolQueueCapacity
    proxyClusterName proxyMode proxyName regionId remotingAccessAddr
    remotingDefaultThreadPoolNums remotingDefaultThreadPoolQueueCapacity
    remotingHeartbeatThreadPoolNums remotingHeartbeatThreadPoolQueueCapacity
    remotingListenPort remotingPullMessageThreadPoolNums remotingPullThreadPoolQueueCapacity
    remotingSendMessageThreadPoolNums remotingSendThreadPoolQueueCapacity
    remotingTopicRouteThreadPoolNums remotingTopicRouteThreadPoolQueueCapacity
    remotingUpdateOffsetThreadPoolNums remotingUpdateOffsetThreadPoolQueueCapacity
    remotingWaitTimeMillsInDefaultQueue remotingWaitTimeMillsInHeartbeatQueue
    remotingWaitTimeMillsInPullQueue remotingWaitTimeMillsInSendQueue
    remotingWaitTimeMillsInTopicRouteQueue remotingWaitTimeMillsInUpdateOffsetQueue
    renewAheadTimeMillis renewMaxThreadPoolNums renewMaxTimeMillis renewSchedulePeriodMillis
    renewThreadPoolNums renewThreadPoolQueueCapacity rocketMQClusterName rocketmqMQClientNum
    sendLatencyEnable startDetectorEnable subscriptionGroupConfigCacheExpiredSeconds
    subscriptionGroupConfigCacheMaxNum subscriptionGroupConfigCacheRefreshSeconds
    tlsCertPath tlsKeyPath tlsTestModeEnable topicConfigCacheExpiredSeconds
    topicConfigCacheMaxNum topicConfigCacheRefreshSeconds
    topicRouteServiceCacheExpiredSeconds topicRouteServiceCacheMaxNum
    topicRouteServiceCacheRefreshSeconds topicRouteServiceThreadPoolNums
    topicRouteServiceThreadPoolQueueCapacity traceOn transactionDataExpireMillis
    transactionDataExpireScanPeriodMillis transactionDataMaxNum
    transactionDataMaxWaitClearMillis transactionHeartbeatBatchNum
    transactionHeartbeatPeriodSecond transactionHeartbeatThreadPoolNums
    transactionHeartbeatThreadPoolQueueCapacity useDelayLevel useEndpointPortFromRequest
    userCacheExpiredSeconds userCacheMaxNum userCacheRefreshSeconds userPropertyMaxNum
    authenticationEnabled authorizationEnabled authConfigPath authenticationProvider
    authorizationProvider authenticationMetadataProvider authorizationMetadataProvider
    innerClientAuthenticationCredentials authenticationWhitelist authorizationWhitelist
    migrateAuthFromV1Enabled statefulAuthenticationCacheMaxNum
"""
APACHE_KEYS = frozenset(_APACHE_KEY_TEXT.split())


def _text(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    raise configlib.ConfigError(f"{key}: null is not a value", key, None)


def load_proxy_config(raw: Mapping[str, Any], *, base: ProxyConfig | None = None
                      ) -> tuple[ProxyConfig, list[str], list[str]]:
    """`raw` (an rmq-proxy.json object) over `base`.

    Returns:
        The config, the 5.3 keys it does not act on, and the keys 5.3 does not know.

    Raises:
        ConfigError: a value that does not convert to its key's type.
    """
    props = {key: _text(key, value) for key, value in raw.items()}
    config, rest = configlib.load(ProxyConfig, props, base=base)
    parse_tls_mode(config.tls_server_mode)
    if config.grpc_front not in FRONTS:
        raise configlib.ConfigError(f"config key 'grpcFront': {config.grpc_front!r} is not one "
                                    f"of {', '.join(FRONTS)}", "grpcFront", config.grpc_front)
    unused = [k for k in rest if k in APACHE_KEYS]
    unknown = [k for k in rest if k not in APACHE_KEYS]
    return config, unused, unknown


def read_proxy_config(path: str | None, *, base: ProxyConfig | None = None
                      ) -> tuple[ProxyConfig, list[str], list[str]]:
    """An rmq-proxy.json file (None: the defaults); see `load_proxy_config`.

    Raises:
        ConfigError: the file cannot be read, is not a JSON object, or has a bad value.
    """
    if path is None:
        return base or ProxyConfig(), [], []
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except OSError as exc:
        raise configlib.ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise configlib.ConfigError(f"{path} is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise configlib.ConfigError(f"{path} must hold a JSON object of settings")
    try:
        return load_proxy_config(raw, base=base)
    except configlib.ConfigError as exc:
        raise configlib.ConfigError(f"{path}: {exc}", exc.key, exc.value) from None

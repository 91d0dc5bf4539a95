"""`BrokerConfig`: the broker's own settings under RocketMQ's property names.

A `broker.conf` holds broker keys and store keys together: `load_broker_config` fills
`BrokerConfig`, hands the keys it does not know to the store's `MessageStoreConfig`, and returns
whatever neither knows, so the caller warns about it.  `listenPort` sets the fast port
(listenPort - 2) and, unless `haListenPort` is given, the HA port (listenPort + 1).
"""

from __future__ import annotations

import enum
import os
import socket
from dataclasses import dataclass, field

from engine.common import config as configlib
from engine.common import properties
from engine.common.config import config_key, secret_key
from engine.protocol.perm import PERM_RW
from engine.remoting.address import local_ip

#: Keys UPDATE_BROKER_CONFIG refuses to change at run time (4.9.7 also refuses paths).
PROTECTED_KEYS = frozenset({"brokerConfigPath", "storePathRootDir", "storePathCommitLog",
                            "listenPort", "brokerName", "brokerClusterName", "brokerId",
                            "reviveQueueNum"})


class MetricsExporterType(enum.Enum):
    """How the broker exports its metrics (5.x `metricsExporterType`; OTLP and LOG not here)."""

    DISABLE = 0
    PROM = 1


def _host_name() -> str:
    try:
        return socket.gethostname() or "DEFAULT_BROKER"
    except OSError:
        return "DEFAULT_BROKER"


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    rocketmq_home: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    namesrv_addr: str | None = field(default_factory=lambda: os.environ.get("NAMESRV_ADDR"))
    broker_ip1: str = config_key("brokerIP1", default_factory=local_ip)
    broker_ip2: str | None = config_key("brokerIP2", None)
    broker_name: str = field(default_factory=_host_name)
    broker_cluster_name: str = "DefaultCluster"
    broker_id: int = 0
    broker_permission: int = PERM_RW
    default_topic_queue_nums: int = 8
    auto_create_topic_enable: bool = True
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    region_id: str = "DefaultRegion"
    trace_on: bool = True
    reject_transaction_message: bool = False
    #: 5.3 RECALL_MESSAGE: off by default, as in 5.3 (refused "operation is forbidden").
    recall_message_enable: bool = False
    allow_recall_when_broker_not_writeable: bool = True
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    notify_consumer_ids_changed_enable: bool = True
    slave_read_enable: bool = False
    offset_check_in_slave: bool = False
    flush_consumer_offset_interval: int = 5000
    register_name_server_period: int = 30_000
    register_broker_timeout_mills: int = 6000
    compressed_register: bool = False
    force_register: bool = True
    start_accept_send_request_time_stamp: int = 0
    transaction_time_out: int = 6000
    transaction_check_max: int = 15
    transaction_check_interval: int = 60_000
    enable_property_filter: bool = False
    channel_expired_timeout: int = 120_000  # ms without heartbeat before a client is dropped
    # ------------------------------------------------------------ HA (4.9.7 MessageStoreConfig)
    ha_master_address: str | None = None  # fixed HA address of the master (slave)
    ha_send_heartbeat_interval: int = 5000  # ms between reports / heartbeats
    ha_housekeeping_interval: int = 20_000  # ms of silence before an HA connection closes
    ha_transfer_batch_size: int = 32 * 1024
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024  # SYNC_MASTER: beyond, SLAVE_NOT_AVAILABLE
    slave_timeout: int = 3000  # ms a SYNC_MASTER send waits for the slave's ack
    # ------------------------------------------------------------ HA (this engine)
    ha_reconnect_interval: int = 5000  # ms a slave waits before reconnecting to its master
    slave_sync_interval: int = 10_000  # ms between metadata syncs from the master
    # ------------------------------------------------------------ NettyServerConfig
    bind_address: str = "0.0.0.0"
    listen_port: int = 10911
    ha_listen_port: int | None = None
    server_channel_max_idle_time_seconds: int = 120
    # ------------------------------------------------------------ access control (docs/acl.md)
    acl_enable: bool = False  # 4.9: plain_acl.yml under $ROCKETMQ_HOME/conf
    authentication_enabled: bool = False  # 5.3 AuthConfig
    authorization_enabled: bool = False
    auth_config_path: str | None = None  # users.json/acls.json; default storePathRootDir/config
    init_authentication_user: str | None = secret_key("initAuthenticationUser")
    inner_client_authentication_credentials: str | None = secret_key(
        "innerClientAuthenticationCredentials")
    # ------------------------------------------------------------ metrics (docs/broker-features.md)
    metrics_exporter_type: MetricsExporterType = MetricsExporterType.DISABLE
    metrics_prom_exporter_host: str = ""  # empty: brokerIP1, as 5.x
    metrics_prom_exporter_port: int = 5557
    # ------------------------------------------------------------ 5.x POP (docs/pop.md)
    revive_queue_num: int = 8  # queues of the revive topic (fixed once the broker has started)
    revive_interval: int = 1000  # ms between two rounds of the revive service
    revive_max_slow: int = 3  # idle rounds stretch to reviveMaxSlow x reviveInterval
    pop_polling_size: int = 1024  # held POP requests per topic@group@queue
    pop_polling_map_size: int = 100_000  # topic@group@queue keys that may hold requests
    max_pop_polling_size: int = 100_000  # held POP and NOTIFICATION requests in all
    pop_from_retry_probability: int = 20  # percent of pops that read the retry topic first
    enable_retry_topic_v2: bool = False  # %RETRY%group+topic instead of %RETRY%group_topic
    retrieve_message_from_pop_retry_topic_v1: bool = True
    init_pop_offset_by_check_msg_in_mem: bool = True
    pop_response_return_actual_retry_topic: bool = False
    enable_pop_message_threshold: bool = False
    pop_inflight_message_threshold: int = 10_000
    # ------------------------------------------------------------ topic attributes (5.x)
    enable_mixed_message_type: bool = False  # allow `+message.type=MIXED` on a topic
    # ------------------------------------------------------------ this engine
    logs_dir: str = field(default_factory=lambda: os.path.join(
        os.path.expanduser("~"), "logs", "rocketmqlogs"))

    def __post_init__(self) -> None:
        problem = _pop_settings_problem(self)
        if problem is not None:
            raise configlib.ConfigError(problem)

    @property
    def broker_addr(self) -> str:
        """What the broker advertises to name servers and clients."""
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def metrics_host(self) -> str:
        """Where /metrics listens: metricsPromExporterHost, else brokerIP1 (as 5.x)."""
        return self.metrics_prom_exporter_host.strip() or self.broker_ip1

    @property
    def fast_port(self) -> int:
        return self.listen_port - 2

    @property
    def ha_port(self) -> int:
        """haListenPort, else listenPort + 1 (0, any free port, when listenPort is 0)."""
        if self.ha_listen_port is not None:
            return self.ha_listen_port
        return self.listen_port + 1 if self.listen_port else 0

    @property
    def fixed_ha_master_address(self) -> str | None:
        """haMasterAddress when set (4.9.7 ignores values shorter than 6 characters)."""
        addr = (self.ha_master_address or "").strip()
        return addr if len(addr) >= 6 else None

    @property
    def ha_server_addr(self) -> str:
        return f"{self.broker_ip2 or self.broker_ip1}:{self.ha_port}"

    @property
    def register_period_ms(self) -> int:
        """registerNameServerPeriod clamped to 10..60 s, as 4.9.7 does."""
        return min(max(self.register_name_server_period, 10_000), 60_000)

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in (self.namesrv_addr or "").split(";") if a.strip()]


def _pop_settings_problem(c: BrokerConfig) -> str | None:
    """Why the POP settings cannot work together, or None."""
    if not 1 <= c.revive_queue_num < 999:  # 999 is the FIFO receipts' revive queue id
        return f"reviveQueueNum={c.revive_queue_num} must be between 1 and 998"
    for key, value in (("reviveInterval", c.revive_interval), ("reviveMaxSlow", c.revive_max_slow)):
        if value < 1:
            return f"{key}={value} must be at least 1"
    for key, value in (("popPollingSize", c.pop_polling_size),
                       ("popPollingMapSize", c.pop_polling_map_size),
                       ("maxPopPollingSize", c.max_pop_polling_size),
                       ("popInflightMessageThreshold", c.pop_inflight_message_threshold)):
        if value < 0:
            return f"{key}={value} must not be negative"
    if not 0 <= c.pop_from_retry_probability <= 100:
        return (f"popFromRetryProbability={c.pop_from_retry_probability} is a percentage: "
                "use 0 to 100")
    return None


def read_properties_file(path: str) -> dict[str, str]:
    """The key=value pairs of a broker.conf.

    Raises:
        ConfigError: the file cannot be read or parsed.
    """
    try:
        with open(path, encoding="utf-8") as f:
            return properties.loads(f.read())
    except OSError as exc:
        raise configlib.ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except properties.PropertiesError as exc:
        raise configlib.ConfigError(f"{path}: {exc}") from None

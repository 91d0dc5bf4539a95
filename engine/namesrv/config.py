"""`NamesrvConfig`: the name server's settings, under RocketMQ's property names.

4.9.7 splits these over `NamesrvConfig` and `NettyServerConfig`; both are read from the same
``-c`` file there, so one dataclass holds both here.  The Netty thread/buffer settings are
accepted (an operator's existing file keeps working) and shown by ``-p``, but asyncio has no
use for them.  `scanNotActiveBrokerInterval`, `brokerChannelExpiredTime` and `logsDir` are this
engine's own additions (4.9.7 hard-codes 10 s and 120 s).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from engine.common import config as configlib
from engine.common.config import secret_key

_HOME = os.path.expanduser("~")


def _rocketmq_home() -> str:
    return os.environ.get("ROCKETMQ_HOME", "")


@dataclass(frozen=True, slots=True)
class NamesrvConfig:
    # ------------------------------------------------------------- NamesrvConfig (4.9.7)
    rocketmq_home: str = field(default_factory=_rocketmq_home)
    kv_config_path: str = os.path.join(_HOME, "namesrv", "kvConfig.json")
    config_store_path: str = os.path.join(_HOME, "namesrv", "namesrv.properties")
    product_env_name: str = "center"
    cluster_test: bool = False
    order_message_enable: bool = False
    # ------------------------------------------------------------- NettyServerConfig (4.9.7)
    bind_address: str = "0.0.0.0"
    listen_port: int = 9876
    server_worker_threads: int = 8
    server_callback_executor_threads: int = 0
    server_selector_threads: int = 3
    server_oneway_semaphore_value: int = 256
    server_async_semaphore_value: int = 64
    server_channel_max_idle_time_seconds: int = 120
    server_socket_snd_buf_size: int = 0
    server_socket_rcv_buf_size: int = 0
    write_buffer_high_water_mark: int = 0
    write_buffer_low_water_mark: int = 0
    server_socket_backlog: int = 1024
    server_pooled_byte_buf_allocator_enable: bool = True
    use_epoll_native_selector: bool = False
    # ------------------------------------------------------------- this engine
    scan_not_active_broker_interval: int = 10_000  # ms between expiry scans
    broker_channel_expired_time: int = 120_000  # ms of silence before a broker is dropped
    logs_dir: str = os.path.join(_HOME, "logs", "rocketmqlogs")
    #: 5.x: run a controller (engine/controller) in this process, configured by the same
    #: file's controllerDLeger* keys; it answers on its peer address, not on listenPort.
    enable_controller_in_namesrv: bool = False
    # ------------------------------------------------------------- access control (this engine)
    #: On: changes (KV config, settings, write perms, broker (un)registration) need a signed
    #: request of a SUPER user: the two users below; reads stay open.
    authentication_enabled: bool = False
    init_authentication_user: str | None = secret_key("initAuthenticationUser")
    inner_client_authentication_credentials: str | None = secret_key(
        "innerClientAuthenticationCredentials")


#: Keys UPDATE_NAMESRV_CONFIG must refuse (NO_PERMISSION), as 4.9.7 does.
PROTECTED_KEYS = frozenset({"kvConfigPath", "configStorePath", "authenticationEnabled",
                            "initAuthenticationUser", "innerClientAuthenticationCredentials"})


def load_namesrv_config(path: str | None) -> tuple[NamesrvConfig, list[str]]:
    """Defaults overlaid with the ``-c`` file; like 4.9.7, the file becomes configStorePath.

    Returns:
        The config and the unknown keys found in the file.

    Raises:
        ConfigError: the file is unreadable or holds a bad value.
    """
    if path is None:
        return NamesrvConfig(), []
    cfg, unknown = configlib.load_file(NamesrvConfig, path)
    return configlib.load(NamesrvConfig, {"configStorePath": path}, base=cfg)[0], unknown

"""`ControllerConfig`: the controller's settings under 5.3.3's property names.

Peers: `controllerDLegerPeers` is `id-host:port;...` as 5.3.3 writes it, and as there each
peer's host:port is where that controller answers remoting requests (brokers' and mqadmin's
`controllerAddr`).  With more than one peer, the controllers replicate through Raft on the
next port up (host:port+1) of each peer; see docs/ha.md.  The metrics and JRaft settings of
5.3.3 are accepted and shown, but unused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from engine.common import config as configlib
from engine.common.config import ConfigError, config_key
from engine.controller.errors import ControllerConfigError

_HOME = os.path.expanduser("~")

#: Keys UPDATE_CONTROLLER_CONFIG always refuses (5.3.3's processor adds rocketmqHome).
ALWAYS_PROTECTED = frozenset({"configBlackList", "configStorePath", "rocketmqHome"})


def _rocketmq_home() -> str:
    return os.environ.get("ROCKETMQ_HOME", "")


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    rocketmq_home: str = field(default_factory=_rocketmq_home)
    config_store_path: str = os.path.join(_HOME, "controller", "controller.properties")
    controller_type: str = "DLedger"
    scan_not_active_broker_interval: int = 5_000  # ms between heartbeat expiry scans
    controller_thread_pool_nums: int = 16
    controller_request_thread_pool_queue_capacity: int = 50_000
    controller_d_leger_group: str | None = config_key("controllerDLegerGroup", None)
    controller_d_leger_peers: str | None = config_key("controllerDLegerPeers", None)
    controller_d_leger_self_id: str | None = config_key("controllerDLegerSelfId", None)
    mapped_file_size: int = 1024 * 1024 * 1024
    controller_store_path: str = ""
    elect_master_max_retry_count: int = 3
    enable_elect_unclean_master: bool = False
    is_process_read_event: bool = False
    notify_broker_role_changed: bool = True
    scan_inactive_master_interval: int = 5_000  # ms between "master gone?" scans
    metrics_exporter_type: str = "DISABLE"
    config_black_list: str = "configBlackList;configStorePath"
    # ---- this engine
    bind_address: str = "0.0.0.0"
    logs_dir: str = os.path.join(_HOME, "logs", "rocketmqlogs")

    def protected_keys(self) -> frozenset[str]:
        return ALWAYS_PROTECTED | {k.strip() for k in self.config_black_list.split(";") if k}

    def store_path(self) -> str:
        """Where the replicated state lives (5.3.3: `$HOME/DledgerController` by default)."""
        return self.controller_store_path or os.path.join(_HOME, "DledgerController")


@dataclass(frozen=True, slots=True)
class Peer:
    id: str
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def raft_address(self) -> str:
        return f"{self.host}:{self.port + 1}"


def parse_peers(text: str | None) -> list[Peer]:
    """`n0-127.0.0.1:9878;n1-127.0.0.1:9868` as peers, in the written order.

    Raises:
        ControllerConfigError: a peer is not `id-host:port`, or an id repeats.
    """
    peers: list[Peer] = []
    for part in (text or "").split(";"):
        part = part.strip()
        if not part:
            continue
        peer_id, dash, address = part.partition("-")
        host, colon, port = address.rpartition(":")
        if not (dash and colon and peer_id and host and port.isdigit()):
            raise ControllerConfigError(f"controllerDLegerPeers: {part!r} is not id-host:port")
        if any(p.id == peer_id for p in peers):
            raise ControllerConfigError(f"controllerDLegerPeers: id {peer_id!r} repeats")
        peers.append(Peer(peer_id, host, int(port)))
    return peers


def self_peer(config: ControllerConfig) -> tuple[Peer, list[Peer]]:
    """This controller's peer and the others.

    Raises:
        ControllerConfigError: no peers, or controllerDLegerSelfId names none of them.
    """
    peers = parse_peers(config.controller_d_leger_peers)
    if not peers:
        raise ControllerConfigError("controllerDLegerPeers is empty: give id-host:port of "
                                    "each controller (e.g. n0-127.0.0.1:9878)")
    me = [p for p in peers if p.id == config.controller_d_leger_self_id]
    if not me:
        raise ControllerConfigError(
            f"controllerDLegerSelfId {config.controller_d_leger_self_id!r} is not one of "
            f"the peers ({', '.join(p.id for p in peers)})")
    return me[0], [p for p in peers if p is not me[0]]


def load_controller_config(path: str | None) -> tuple[ControllerConfig, list[str]]:
    """Defaults overlaid with the `-c` file, which also becomes configStorePath.

    Raises:
        ConfigError: unreadable file or bad value.
    """
    if path is None:
        return ControllerConfig(), []
    cfg, unknown = configlib.load_file(ControllerConfig, path)
    return configlib.load(ControllerConfig, {"configStorePath": path}, base=cfg)[0], unknown


__all__ = ["ConfigError", "ControllerConfig", "Peer", "load_controller_config", "parse_peers",
           "self_peer"]

"""Which brokers are alive: the heartbeat table (5.3 `DefaultBrokerHeartbeatManager`).

A broker is alive while its last BROKER_HEARTBEAT is younger than the timeout it sent
(10 s when it sent none) and its connection is open: a closed connection (a killed
process) makes it inactive at once, which is what starts a fast election.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.controller.elect import LiveInfo
from engine.protocol.header.controller import BrokerHeartbeatRequestHeader

DEFAULT_TIMEOUT_MS = 10_000

Clock = Callable[[], int]
BrokerKey = tuple[str, str, int]
"""(cluster name, broker name, broker id)."""


@dataclass(frozen=True, slots=True)
class BrokerLive:
    address: str
    last_update_ms: int
    timeout_ms: int
    info: LiveInfo
    confirm_offset: int
    connection: object | None


class LiveTable:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.brokers: dict[BrokerKey, BrokerLive] = {}

    def on_heartbeat(self, req: BrokerHeartbeatRequestHeader, connection: object | None) -> None:
        if req.broker_id is None:
            return
        key = (req.cluster_name, req.broker_name, req.broker_id)
        old = self.brokers.get(key)
        info = LiveInfo(req.epoch if req.epoch is not None else (old.info.epoch if old else 0),
                        req.max_offset if req.max_offset is not None else (
                            old.info.max_offset if old else 0),
                        req.election_priority if req.election_priority is not None else (
                            old.info.election_priority if old else 0))
        self.brokers[key] = BrokerLive(
            req.broker_addr, self.clock(), req.heartbeat_timeout_mills or DEFAULT_TIMEOUT_MS,
            info, req.confirm_offset or 0, connection)

    def is_alive(self, cluster: str, broker_name: str, broker_id: int) -> bool:
        return self.get(cluster, broker_name, broker_id) is not None

    def get(self, cluster: str, broker_name: str, broker_id: int) -> LiveInfo | None:
        live = self.brokers.get((cluster, broker_name, broker_id))
        if live is None or self.clock() - live.last_update_ms > live.timeout_ms:
            return None
        return live.info

    def on_connection_closed(self, connection: object) -> list[BrokerKey]:
        """Forget the brokers that heartbeated over `connection`; returns them."""
        gone = [k for k, v in self.brokers.items() if v.connection is connection]
        for key in gone:
            del self.brokers[key]
        return gone

    def expire(self) -> list[BrokerKey]:
        """Forget brokers silent past their timeout; returns them."""
        now = self.clock()
        gone = [k for k, v in self.brokers.items() if now - v.last_update_ms > v.timeout_ms]
        for key in gone:
            del self.brokers[key]
        return gone

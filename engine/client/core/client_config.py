"""`ClientConfig`: what every producer and consumer shares: name servers, identity, timers.

How this works: the name-server list comes, in this order, from `namesrv_addr`, the
``NAMESRV_ADDR`` environment variable, or an HTTP address server (`nsaddr.py`).  The client id
is ``clientIP@instanceName[@unitName]``; producers and clustering consumers whose instance
name is still ``DEFAULT`` take ``<pid>#<nanotime>`` instead when they start (so two of them
in one process get two client instances), while broadcasting consumers keep ``DEFAULT`` so
their local offset file is found again after a restart.  Timer defaults are Java's
(client-behaviour.md §1), in milliseconds.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field

from engine.protocol.signature import Credentials
from engine.remoting.address import local_ip

DEFAULT_INSTANCE_NAME = "DEFAULT"
#: Java's `rocketmq.namesrv.domain` and `rocketmq.namesrv.domain.subgroup` defaults.
DEFAULT_NAMESRV_DOMAIN = "jmenv.tbsite.net"
DEFAULT_NAMESRV_SUBGROUP = "nsaddr"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    namesrv_addr: str | None = None  # "host:port;host:port"
    namesrv_domain: str = DEFAULT_NAMESRV_DOMAIN
    address_server_url: str | None = None  # overrides the URL built from namesrv_domain
    client_ip: str = field(default_factory=local_ip)
    instance_name: str = DEFAULT_INSTANCE_NAME
    unit_name: str | None = None
    poll_name_server_interval: int = 30_000
    heartbeat_broker_interval: int = 30_000
    persist_consumer_offset_interval: int = 5_000
    fetch_namesrv_interval: int = 120_000
    rebalance_interval: int = 20_000
    mq_client_api_timeout: int = 3_000
    #: Sign every request with these (brokers with access control on); None: unsigned.
    credentials: Credentials | None = None

    def resolved_namesrv_addr(self) -> str | None:
        """`namesrv_addr`, else ``NAMESRV_ADDR``; None means "ask the address server"."""
        addr = self.namesrv_addr or os.environ.get("NAMESRV_ADDR") or None
        return addr.strip() if addr else None

    def address_server(self) -> str:
        """`TopAddressing`'s URL: ``http://<domain>:8080/rocketmq/nsaddr`` (a domain that
        already names a port keeps it), with ``-<unit>?nofix=1`` for a unit."""
        if self.address_server_url:
            url = self.address_server_url
        else:
            host = self.namesrv_domain
            if ":" not in host:
                host += ":8080"
            url = f"http://{host}/rocketmq/{DEFAULT_NAMESRV_SUBGROUP}"
        if self.unit_name:
            url += f"-{self.unit_name}?nofix=1"
        return url

    def client_id(self) -> str:
        """``clientIP@instanceName[@unitName]`` (`ClientConfig.buildMQClientId`)."""
        cid = f"{self.client_ip}@{self.instance_name}"
        return f"{cid}@{self.unit_name}" if self.unit_name else cid

    def with_pid_instance_name(self) -> ClientConfig:
        """`changeInstanceNameToPID`: ``DEFAULT`` becomes ``<pid>#<nanotime>``."""
        if self.instance_name != DEFAULT_INSTANCE_NAME:
            return self
        return dataclasses.replace(self, instance_name=f"{os.getpid()}#{time.monotonic_ns()}")

"""What every RPC shares: settings, the broker gateway, client sessions, transactions, auth.

How this works: `ProxyCore.enter` is the first step of each RPC, as 5.3's request pipeline:
it reads the call's headers, checks the signature and the rules (`GrpcAuth`), and opens the
calling client's session (a call without x-mq-client-id is CLIENT_ID_REQUIRED); the
peer address is the client's own even through the permissive mode's join.  The advertised
endpoints are what QueryRoute answers when the client names none.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc

from engine.proxy.auth import GrpcAuth
from engine.proxy.brokers import BrokerGateway
from engine.proxy.caller import CallContext, call_context
from engine.proxy.config import ProxyConfig
from engine.proxy.sessions import ClientSession, SessionTable
from engine.proxy.transactions import TransactionTable
from engine.proxy.v2 import definition_pb2 as pb


class ProxyCore:
    def __init__(self, config: ProxyConfig, gateway: BrokerGateway,
                 auth: GrpcAuth | None) -> None:
        self.config = config
        self.gateway = gateway
        self.auth = auth
        self.transactions = TransactionTable(config.transaction_data_expire_millis)
        self.sessions = SessionTable(
            self.transactions, gateway.credentials, config.grpc_client_idle_time_mills,
            relay_timeout_s=config.grpc_proxy_relay_request_timeout_in_seconds)
        #: host:port clients are told to use (set when the server is bound).
        self.advertised = ""
        #: grpc's peer text -> the client's own (set when a `PortJoin` stands in between).
        self.resolve_peer: Callable[[str], str] | None = None
        self._send_turn: dict[str, int] = {}

    def endpoints(self, asked: pb.Endpoints | None = None) -> pb.Endpoints:
        """The endpoints routes name: those the client asked with (5.3), else the proxy's."""
        if asked is not None and asked.addresses:
            return asked
        host, _, port = self.advertised.rpartition(":")
        return pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=int(port))])

    def context(self, context: grpc.aio.ServicerContext[object, object]) -> CallContext:
        peer = context.peer()
        if self.resolve_peer is not None:
            peer = self.resolve_peer(peer)
        return call_context(context.invocation_metadata() or (), peer)

    def enter(self, context: grpc.aio.ServicerContext[object, object],
              request: object) -> tuple[CallContext, ClientSession]:
        """Authenticate and authorize the call, and open its client's session.

        Raises:
            ProxyError: UNAUTHORIZED or CLIENT_ID_REQUIRED.
        """
        ctx = self.context(context)
        if self.auth is not None:
            self.auth.check(ctx, request)
        return ctx, self.sessions.open(ctx)

    def next_turn(self, topic: str) -> int:
        turn = self._send_turn.get(topic, -1) + 1
        self._send_turn[topic] = turn & 0x7FFFFFFF
        return turn

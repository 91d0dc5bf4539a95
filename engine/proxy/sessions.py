"""gRPC clients as the brokers see them: one session per client id, with its own connections.

How this works: a 5.x client is known by its x-mq-client-id.  Its session keeps the settings
it announced on Telemetry and a `RemotingClient` of its own, over which the proxy sends
HEART_BEAT to the brokers on its behalf, with the client's id, language and version (5.3's
proxy registers a channel per gRPC client the same way), so `consumerConnection` and
`producerConnection` list each gRPC client as its own connection.  Producers register under
each topic they publish (5.3 uses the topic as a gRPC producer's group), consumers under
their group with their subscriptions.  A broker's CHECK_TRANSACTION_STATE arrives on the
connection of the client it picked and is passed on as a RecoverOrphanedTransactionCommand
on that client's Telemetry stream; its EndTransaction goes back on the same connection.
GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY are relayed the same way, and their
answers awaited (`relay.py`).  A client silent for grpcClientIdleTimeMills, or one that said
NotifyClientTermination, is unregistered (UNREGISTER_CLIENT) and its connections closed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable

from engine.client.errors import ClientError
from engine.protocol import fastjson
from engine.protocol.body.heartbeat import (
    GRPC_PROTOCOL,
    PROXY_CLIENT_ADDR,
    PROXY_PROTOCOL,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    ExpressionType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from engine.protocol.codes import LanguageCode, RequestCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.errors import ProtocolError
from engine.protocol.header.broker import (
    CheckTransactionStateRequestHeader,
    UnregisterClientRequestHeader,
)
from engine.protocol.message import PROPERTY_PRODUCER_GROUP, decode_record
from engine.protocol.signature import Credentials
from engine.protocol.wire import from_ext, to_ext, to_json
from engine.proxy.caller import CallContext
from engine.proxy.messages import to_proto
from engine.proxy.relay import PendingCalls
from engine.proxy.relay import router as relay_router
from engine.proxy.status import OK_STATUS, ProxyError
from engine.proxy.transactions import HalfMessage, TransactionTable, commit_log_offset
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.remoting.client import InProcessConnector, RemotingClient
from engine.remoting.errors import RemotingError
from engine.remoting.router import RequestContext, Router

log = logging.getLogger("engine.proxy")

HEARTBEAT_TIMEOUT_S = 3.0
#: How long a relayed request waits for the client's answer (grpcProxyRelayRequestTimeout).
RELAY_TIMEOUT_S = 5.0
#: Commands waiting for a client's Telemetry stream (more are dropped: the broker asks again).
OUTBOX_LIMIT = 1024

router = Router().include(relay_router)

#: What a Telemetry stream's writer takes: a command, the failure that ends the stream, or
#: None when the client closed its side.
OutboxItem = spb.TelemetryCommand | BaseException | None


def subscription(entry: pb.SubscriptionEntry) -> SubscriptionData:
    """A 5.x subscription entry as remoting's `SubscriptionData` (5.3 `FilterAPI.build`).

    Raises:
        ProxyError: ILLEGAL_FILTER_EXPRESSION.
    """
    expression = entry.expression.expression or "*"
    kind = ExpressionType.SQL92 if entry.expression.type == pb.SQL else ExpressionType.TAG
    try:
        return SubscriptionData.build(entry.topic.name, expression, kind)
    except (ValueError, ProtocolError) as exc:
        raise ProxyError(pb.ILLEGAL_FILTER_EXPRESSION,
                         f"expression format is not correct: {exc}") from None


#: A client's language as its settings' user agent names it (5.x `Language`), as remoting's.
USER_AGENT_LANGUAGES = {
    pb.JAVA: LanguageCode.JAVA, pb.CPP: LanguageCode.CPP, pb.DOT_NET: LanguageCode.DOTNET,
    pb.GOLANG: LanguageCode.GO, pb.RUST: LanguageCode.RUST, pb.PYTHON: LanguageCode.PYTHON,
    pb.PHP: LanguageCode.PHP, pb.NODE_JS: LanguageCode.NODE_JS, pb.RUBY: LanguageCode.RUBY,
}


class ClientSession:
    """One gRPC client: its settings, its Telemetry stream, its connections to brokers."""

    def __init__(self, client_id: str, ctx: CallContext, transactions: TransactionTable,
                 credentials: Credentials | None, relay_timeout_s: float = RELAY_TIMEOUT_S,
                 local: LocalBroker | None = None) -> None:
        self.client_id = client_id
        self.language = ctx.language_code
        self.version = ctx.version_ordinal
        self.remote_addr = ctx.remote_addr
        self.transactions = transactions
        self.credentials = credentials
        self.remoting = RemotingClient(router, self, connect_timeout=3.0,
                                       credentials=credentials)
        if local is not None:
            self.remoting.reach_in_process(local.addr, local.connector(ctx.remote_addr))
        self.settings: pb.Settings | None = None
        self.last_seen = time.monotonic()
        self.started_ms = int(time.time() * 1000)
        #: The open Telemetry stream's queue of commands to the client (None: no stream).
        self.outbox: asyncio.Queue[OutboxItem] | None = None
        self.brokers: dict[str, str] = {}  # name -> address this client is registered with
        #: Commands relayed from brokers awaiting the client's answer (`relay.py`).
        self.pending = PendingCalls()
        self.relay_timeout_s = relay_timeout_s

    def touch(self) -> None:
        self.last_seen = time.monotonic()

    def adopt_user_agent(self, user_agent: pb.UA) -> None:
        """The language of the client's settings, where it names one, over x-mq-language: the
        Node.js client sends "HTTP" there (Apache's LanguageCode has no name it accepts), and
        NODE_JS in its user agent."""
        language = USER_AGENT_LANGUAGES.get(user_agent.language)
        if language is not None:
            self.language = language.value

    # ------------------------------------------------------------------ what it is

    @property
    def client_type(self) -> int:
        s = self.settings
        return s.client_type if s is not None else pb.CLIENT_TYPE_UNSPECIFIED

    @property
    def topics(self) -> list[str]:
        s = self.settings
        if s is None:
            return []
        if s.HasField("publishing"):
            return [t.name for t in s.publishing.topics]
        if s.HasField("subscription"):
            return [e.topic.name for e in s.subscription.subscriptions]
        return []

    @property
    def group(self) -> str | None:
        s = self.settings
        if s is not None and s.HasField("subscription"):
            return s.subscription.group.name
        return None

    def heartbeat_data(self) -> HeartbeatData:
        s = self.settings
        if s is None:
            return HeartbeatData(self.client_id)
        if s.HasField("publishing"):
            return HeartbeatData(self.client_id, producer_data_set=frozenset(
                ProducerData(t.name) for t in s.publishing.topics))
        if s.HasField("subscription"):
            sub = s.subscription
            kind = (ConsumeType.CONSUME_ACTIVELY if s.client_type == pb.SIMPLE_CONSUMER
                    else ConsumeType.CONSUME_PASSIVELY)
            data = ConsumerData(sub.group.name, kind, MessageModel.CLUSTERING,
                                ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                                frozenset(subscription(e) for e in sub.subscriptions))
            return HeartbeatData(self.client_id, consumer_data_set=frozenset({data}))
        return HeartbeatData(self.client_id)

    # ------------------------------------------------------------------ brokers

    def _command(self, code: int, ext: dict[str, str] | None = None,
                 body: bytes | None = None) -> RemotingCommand:
        return dataclasses.replace(request(code, ext, body), language=self.language,
                                   version=self.version)

    async def register(self, masters: dict[str, str]) -> None:
        """HEART_BEAT to each broker of `masters` on the client's behalf (failures logged)."""
        body = fastjson.dumpb(to_json(self.heartbeat_data()))
        ext = {PROXY_PROTOCOL: GRPC_PROTOCOL}
        if self.remote_addr:
            ext[PROXY_CLIENT_ADDR] = self.remote_addr
        cmd = self._command(RequestCode.HEART_BEAT, ext, body=body)

        async def one(name: str, addr: str) -> None:
            try:
                resp = await self.remoting.invoke(addr, cmd, HEARTBEAT_TIMEOUT_S)
            except RemotingError as exc:
                log.warning("heartbeat of %s to %s failed: %s", self.client_id, addr, exc)
                return
            if resp.code != 0:
                log.warning("heartbeat of %s refused by %s: %s", self.client_id, addr,
                            resp.remark)
                return
            self.brokers[name] = addr

        await asyncio.gather(*(one(n, a) for n, a in masters.items()))

    async def unregister(self) -> None:
        """UNREGISTER_CLIENT from every broker, then close the client's connections."""
        header = UnregisterClientRequestHeader(
            self.client_id, producer_group=None, consumer_group=self.group)
        groups = [self.group] if self.group else self.topics
        for addr in set(self.brokers.values()):
            for group in groups:
                if self.group:
                    h = header
                else:
                    h = UnregisterClientRequestHeader(self.client_id, producer_group=group)
                try:
                    await self.remoting.invoke(addr, self._command(
                        RequestCode.UNREGISTER_CLIENT, to_ext(h)), HEARTBEAT_TIMEOUT_S)
                except (RemotingError, ClientError) as exc:
                    log.info("unregister of %s from %s failed: %s", self.client_id, addr, exc)
        self.brokers.clear()
        await self.remoting.close()

    # ------------------------------------------------------------------ Telemetry

    def push(self, command: spb.TelemetryCommand) -> bool:
        """Queue a command for the client's Telemetry stream; False when it has none."""
        outbox = self.outbox
        if outbox is None or outbox.qsize() >= OUTBOX_LIMIT:
            return False
        outbox.put_nowait(command)
        return True


Ctx = RequestContext[ClientSession]


@router.handles(RequestCode.CHECK_TRANSACTION_STATE)
def check_transaction_state(ctx: Ctx, cmd: RemotingCommand) -> None:
    """A broker asks about a half message: ask the client over Telemetry."""
    session = ctx.state
    try:
        header = from_ext(CheckTransactionStateRequestHeader, cmd.ext_fields)
        record = decode_record(cmd.body or b"")
    except ProtocolError as exc:
        log.warning("CHECK_TRANSACTION_STATE from %s does not decode: %s",
                    ctx.connection.remote_addr, exc)
        return
    props = record.properties()
    group = props.get(PROPERTY_PRODUCER_GROUP, record.topic)
    transaction_id = header.transaction_id or header.msg_id or ""
    offset_msg_id = header.offset_msg_id or ""
    try:
        cl_offset = commit_log_offset(offset_msg_id) if offset_msg_id else header.commit_log_offset
    except ValueError:
        cl_offset = header.commit_log_offset
    message = to_proto(record, props=props, offset_msg_id=offset_msg_id)
    session.transactions.add(HalfMessage(
        producer_group=group, transaction_id=transaction_id,
        msg_id=message.system_properties.message_id, broker_name="",
        broker_addr=ctx.connection.remote_addr,
        tran_state_table_offset=header.tran_state_table_offset,
        commit_log_offset=cl_offset, expires_at=session.transactions.deadline(),
        check_conn=ctx.connection))
    command = spb.TelemetryCommand(
        status=OK_STATUS,
        recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
            message=message, transaction_id=transaction_id))
    if not session.push(command):
        log.info("transaction %s: client %s has no Telemetry stream; the broker asks again",
                 transaction_id, session.client_id)


@dataclasses.dataclass(frozen=True, slots=True)
class LocalBroker:
    """Local mode: the proxy's own broker, which its sessions reach in-process.

    `connector(peer)` makes the connections of a client whose gRPC peer is `peer`: trusted,
    so the broker takes the client's requests as its own (checked once, at the proxy, as
    5.3.3's local mode does), and listed with the client's address.
    """

    addr: str
    connector: Callable[[str], InProcessConnector]


class SessionTable:
    """Sessions by client id, created on first sight, expired when idle."""

    def __init__(self, transactions: TransactionTable, credentials: Credentials | None,
                 idle_ms: int, *, on_expired: Callable[[ClientSession], None] | None = None,
                 relay_timeout_s: float = RELAY_TIMEOUT_S) -> None:
        self.transactions = transactions
        self.relay_timeout_s = relay_timeout_s
        self.credentials = credentials
        self.idle_s = idle_ms / 1000
        self.on_expired = on_expired
        self._sessions: dict[str, ClientSession] = {}
        #: Set in local mode (`engine.proxy.local`).
        self.local: LocalBroker | None = None

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, client_id: str) -> ClientSession | None:
        return self._sessions.get(client_id)

    def open(self, ctx: CallContext) -> ClientSession:
        """The session of the calling client (created on its first call).

        Raises:
            ProxyError: CLIENT_ID_REQUIRED.
        """
        if not ctx.client_id.strip():
            raise ProxyError(pb.CLIENT_ID_REQUIRED, "client id cannot be empty")
        session = self._sessions.get(ctx.client_id)
        if session is None:
            session = self._sessions[ctx.client_id] = ClientSession(
                ctx.client_id, ctx, self.transactions, self.credentials, self.relay_timeout_s,
                self.local)
        session.touch()
        return session

    def remove(self, client_id: str) -> ClientSession | None:
        return self._sessions.pop(client_id, None)

    def idle(self) -> list[ClientSession]:
        """Take out the sessions silent for longer than the idle time."""
        deadline = time.monotonic() - self.idle_s
        gone = [s for s in self._sessions.values() if s.last_seen < deadline]
        for session in gone:
            del self._sessions[session.client_id]
        return gone

    def all(self) -> list[ClientSession]:
        return list(self._sessions.values())

"""Access control over gRPC: the 5.x signature, then the same rules as remoting.

How this works (5.3 `DefaultAuthenticationContextBuilder` for gRPC metadata, the clients'
`Signature`): a signed call carries ``authorization: MQv2-HMAC-SHA1 Credential=<AK>,
SignedHeaders=x-mq-date-time, Signature=<hex>``, the hex HMAC-SHA1 of the x-mq-date-time
header's text under the user's secret.  The user is looked up in the same `AuthTables`
snapshot the remoting guard uses (the broker's users and ACLs in local mode, the files under
authConfigPath in cluster mode), the signature compared in constant time, and each resource
the call touches (`call_needs`, built with `engine.auth.needs`'s resource helpers) decided by
`engine.auth.decide.authorize`, the remoting decision path.  A refusal is `ProxyError`
UNAUTHORIZED (40100), the status 5.3.3's `ResponseBuilder` gives both authentication and
authorization failures.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass

from engine.auth.decide import authorize
from engine.auth.guard import AuthTables
from engine.auth.model import Action, UserStatus, UserType
from engine.auth.needs import Need, group, topic_or_group
from engine.proxy.caller import CallContext
from engine.proxy.status import ProxyError
from engine.proxy.v2 import definition_pb2 as pb

ALGORITHM = "MQv2-HMAC-SHA1"
PUB, SUB = (Action.PUB,), (Action.SUB,)
PUB_SUB = (Action.PUB, Action.SUB)


@dataclass(frozen=True, slots=True)
class Authorization:
    """The parsed `authorization` header."""

    access_key: str
    signed_headers: str
    signature: str


def parse_authorization(text: str) -> Authorization | None:
    """``MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=..., Signature=...`` (None: malformed)."""
    algorithm, _, rest = text.strip().partition(" ")
    if algorithm != ALGORITHM:
        return None
    fields: dict[str, str] = {}
    for part in rest.split(","):
        key, sep, value = part.strip().partition("=")
        if sep:
            fields[key.strip()] = value.strip()
    credential = fields.get("Credential", "")
    # 5.3 takes the access key as the first "/"-separated part of the credential.
    access_key = credential.split("/", 1)[0]
    signature = fields.get("Signature", "")
    if not access_key or not signature:
        return None
    return Authorization(access_key, fields.get("SignedHeaders", ""), signature)


def hex_signature(secret: str, date_time: str) -> str:
    return hmac.new(secret.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1).hexdigest()


# ---------------------------------------------------------------------- what a call needs

def _topic(resource: pb.Resource) -> Need:
    return topic_or_group(resource.name), PUB


def telemetry_needs(settings: pb.Settings) -> list[Need]:
    """A client's settings: Pub on each topic it publishes, Sub on its group and topics."""
    if settings.HasField("publishing"):
        return [(topic_or_group(t.name), PUB) for t in settings.publishing.topics]
    if settings.HasField("subscription"):
        sub = settings.subscription
        needs: list[Need] = [(group(sub.group.name), SUB)]
        needs += [(topic_or_group(e.topic.name), SUB) for e in sub.subscriptions]
        return needs
    return []


def call_needs(request: object) -> list[Need]:
    """The resources a request touches and the actions that allow each (5.3's gRPC table)."""
    if isinstance(request, pb.Settings):
        return telemetry_needs(request)
    topic = getattr(request, "topic", None)
    grp = getattr(request, "group", None)
    messages = getattr(request, "messages", None)
    needs: list[Need] = []
    name = type(request).__name__
    if name == "SendMessageRequest" and messages:
        needs.append(_topic(messages[0].topic))
    elif name in ("EndTransactionRequest", "RecallMessageRequest") and topic is not None:
        needs.append(_topic(topic))
    elif name == "QueryRouteRequest" and topic is not None:
        needs.append((topic_or_group(topic.name), PUB_SUB))
    elif name in ("ReceiveMessageRequest",):
        mq = getattr(request, "message_queue", None)
        if grp is not None and grp.name:
            needs.append((group(grp.name), SUB))
        if mq is not None:
            needs.append((topic_or_group(mq.topic.name), SUB))
    elif name in ("QueryAssignmentRequest", "AckMessageRequest",
                  "ChangeInvisibleDurationRequest", "ForwardMessageToDeadLetterQueueRequest"):
        if grp is not None and grp.name:
            needs.append((group(grp.name), SUB))
        if topic is not None and topic.name:
            needs.append((topic_or_group(topic.name), SUB))
    elif name in ("HeartbeatRequest", "NotifyClientTerminationRequest") and grp is not None \
            and grp.name:
        needs.append((group(grp.name), SUB))
    return needs


# ---------------------------------------------------------------------- the check

class GrpcAuth:
    """Checks calls against the users and rules `tables()` returns (the remoting snapshot).

    A proxy worker reads them from the broker's files every few seconds; `refresh` (re-read
    them now if a file changed; True when it did) lets a refused call be checked once more
    against what was just written, so a user or rule added at the broker works at once
    (a removed one is gone at the next periodic read)."""

    def __init__(self, tables: Callable[[], AuthTables], *, authentication: Callable[[], bool],
                 authorization: Callable[[], bool],
                 refresh: Callable[[], bool] | None = None) -> None:
        self._tables = tables
        self._authentication = authentication
        self._authorization = authorization
        self._refresh = refresh

    @property
    def enabled(self) -> bool:
        return self._authentication() or self._authorization()

    def check(self, ctx: CallContext, request: object) -> None:
        """Return when the call may proceed.

        Raises:
            ProxyError: UNAUTHORIZED, with what was missing (never a secret).
        """
        try:
            self._check(ctx, request)
        except ProxyError:
            if self._refresh is None or not self._refresh():
                raise
            self._check(ctx, request)

    def _check(self, ctx: CallContext, request: object) -> None:
        authentication, authorization = self._authentication(), self._authorization()
        if not (authentication or authorization):
            return
        what = type(request).__name__
        if not ctx.authorization:
            raise ProxyError(pb.UNAUTHORIZED, f"{what} is not signed: the authorization "
                                              "header (client credentials) is required")
        parsed = parse_authorization(ctx.authorization)
        if parsed is None:
            raise ProxyError(pb.UNAUTHORIZED, f"{what}: the authorization header is not "
                                              f"'{ALGORITHM} Credential=..., Signature=...'")
        tables = self._tables()
        user = tables.users.get(parsed.access_key)
        if user is None:
            raise ProxyError(pb.UNAUTHORIZED, f"{what}: unknown AccessKey {parsed.access_key!r}")
        if user.status is UserStatus.DISABLE:
            raise ProxyError(pb.UNAUTHORIZED, f"{what}: user {parsed.access_key!r} is disabled")
        if authentication:
            expected = hex_signature(user.password, ctx.date_time)
            if not hmac.compare_digest(expected, parsed.signature.lower()):
                raise ProxyError(pb.UNAUTHORIZED, f"{what}: signature check failed for "
                                                  f"AccessKey {parsed.access_key!r}")
        if not authorization or user.user_type is UserType.SUPER:
            return
        ip = ctx.remote_addr.rsplit(":", 1)[0].strip("[]")
        why = authorize(user, tables.acls.get(user.username), call_needs(request), ip)
        if why is not None:
            raise ProxyError(pb.UNAUTHORIZED, f"{what}: User:{user.username} from {ip}: {why}")

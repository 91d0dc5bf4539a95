"""CHECK_CLIENT_CONFIG body: a client asks whether the broker accepts its subscription."""

from __future__ import annotations

from dataclasses import dataclass

from engine.protocol.body.heartbeat import ClientId, GroupName, SubscriptionData


@dataclass(frozen=True, slots=True)
class CheckClientRequestBody:
    client_id: ClientId = ""
    group: GroupName = ""
    subscription_data: SubscriptionData | None = None

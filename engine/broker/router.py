"""The broker's router: every handler module's routes, merged."""

from __future__ import annotations

from engine.broker.handlers import (
    admin_acl_v1,
    admin_auth,
    admin_broker,
    admin_consumer,
    admin_group,
    admin_timer,
    admin_topic,
    client,
    ha,
    lock,
    offsets,
    pop,
    pop_ack,
    pull,
    query,
    recall,
    send,
    send_back,
    store_admin,
    transaction,
)
from engine.remoting.router import Router

MODULES = (admin_auth, admin_acl_v1, send, send_back, transaction, pull, offsets, client, lock,
           query, admin_topic, admin_group, admin_broker, admin_consumer, store_admin, ha, pop,
           pop_ack, admin_timer, recall)


def build_router() -> Router:
    router = Router()
    for module in MODULES:
        router.include(module.router)
    return router

"""Request handlers of the name server, one module per request family."""

from __future__ import annotations

from engine.namesrv.handlers import broker, config, kv, route
from engine.remoting.router import Router


def build_router() -> Router:
    """One router with every name-server request code 4.9.7 handles (20 codes)."""
    merged = Router()
    for module in (broker, route, kv, config):
        merged.include(module.router)
    return merged

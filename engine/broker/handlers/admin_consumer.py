"""Broker handlers: admin_consumer."""

from __future__ import annotations

from engine.remoting.router import Router

router = Router()

"""Broker handlers: admin_broker."""

from __future__ import annotations

from engine.remoting.router import Router

router = Router()

"""Broker handlers: store_admin."""

from __future__ import annotations

from engine.remoting.router import Router

router = Router()

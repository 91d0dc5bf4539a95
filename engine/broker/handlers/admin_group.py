"""Broker handlers: admin_group."""

from __future__ import annotations

from engine.remoting.router import Router

router = Router()

"""Typed custom headers (extFields), as frozen dataclasses converted by `engine.protocol.wire`."""

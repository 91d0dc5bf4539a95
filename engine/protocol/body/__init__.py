"""JSON (and a few binary) request/response bodies, as frozen dataclasses."""

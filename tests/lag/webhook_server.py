"""A real local HTTP server that records the JSON POSTed to it (and can fail on purpose)."""

from __future__ import annotations

import json
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class WebhookServer:
    """``with WebhookServer(fail_first=2) as hook: ... hook.url ... hook.events.get()``."""

    def __init__(self, fail_first: int = 0, fail_status: int = 503) -> None:
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.attempts = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.attempts += 1
                if outer.attempts <= outer.fail_first:
                    self.send_response(outer.fail_status)
                    self.end_headers()
                    return
                outer.events.put(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def __enter__(self) -> WebhookServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def take(self, kind: str, timeout: float = 15.0) -> dict[str, Any]:
        """The next event of `kind` (others are skipped)."""
        while True:
            event = self.events.get(timeout=timeout)
            if event.get("event") == kind:
                return event

"""A loopback webhook receiver: records every body it is sent, with its headers."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """Answers ``status`` to every POST and keeps ``(path, headers, body)`` of each."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.got: list[tuple[str, dict[str, str], bytes]] = []
        self.arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                with receiver.arrived:
                    receiver.got.append((self.path, dict(self.headers.items()), body))
                    receiver.arrived.notify_all()
                self.send_response(receiver.status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def bodies(self, path: str) -> list[dict[str, Any]]:
        with self.arrived:
            return [json.loads(b) for p, _, b in self.got if p == path]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

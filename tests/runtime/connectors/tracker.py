"""A small issue tracker on a loopback port: the fixture server connector tests send to.

It keeps issues in memory, counts every request by method and path, records the
``Authorization`` and ``Idempotency-Key`` headers it saw, and can redirect one path elsewhere
(to prove a connector never follows a hop off its origin).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Tracker:
    """The server's state; ``url`` is its base URL once started."""

    issues: dict[str, dict[str, Any]] = field(default_factory=dict)
    hits: Counter[str] = field(default_factory=Counter)
    authorizations: list[str] = field(default_factory=list)
    idempotency_keys: list[str] = field(default_factory=list)
    redirect_to: str | None = None
    # how a write is answered: "yes"; "drop" (applied, then the connection is closed with no
    # answer); "lose" (closed with no answer, not applied); "hold" (applied, the answer
    # waits for ``release``)
    answer_writes: str = "yes"
    release: threading.Event = field(default_factory=threading.Event)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def writes(self) -> int:
        """POST requests received."""
        return sum(n for key, n in self.hits.items() if key.startswith("POST "))


def _handler(tracker: Tracker) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _note(self) -> list[str]:
            path = self.path.split("?")[0]
            with tracker.lock:
                tracker.hits[f"{self.command} {path}"] += 1
                tracker.authorizations.append(self.headers.get("Authorization", ""))
                if self.headers.get("Idempotency-Key"):
                    tracker.idempotency_keys.append(self.headers["Idempotency-Key"])
            return path.strip("/").split("/")

        def do_GET(self) -> None:
            parts = self._note()
            if parts[:1] == ["redirect"] and tracker.redirect_to:
                self._send(302, {}, {"Location": tracker.redirect_to})
                return
            if len(parts) == 3 and parts[:2] == ["api", "issues"]:
                issue = tracker.issues.get(parts[2])
                if issue is None:
                    self._send(404, {"error": "no such issue"})
                else:
                    self._send(200, issue)
                return
            self._send(404, {"error": "no route"})

        def do_POST(self) -> None:
            parts = self._note()
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if tracker.answer_writes == "lose":
                self.close_connection = True
                return
            if len(parts) == 4 and parts[:2] == ["api", "issues"]:
                with tracker.lock:
                    issue = tracker.issues.setdefault(
                        parts[2], {"id": parts[2], "title": "", "labels": [], "comments": []}
                    )
                    if parts[3] == "labels":
                        issue["labels"].append(body.get("label"))
                        issue["label"] = body.get("label")
                    elif parts[3] == "comments":
                        issue["comments"].append(body.get("body"))
                if tracker.answer_writes == "drop":
                    self.close_connection = True
                    return
                if tracker.answer_writes == "hold":
                    tracker.release.wait(30)
                self._send(201, issue)
                return
            self._send(404, {"error": "no route"})

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


class TrackerServer:
    """Start a :class:`Tracker` on 127.0.0.1 in a thread; ``stop()`` shuts it down."""

    def __init__(self, tracker: Tracker | None = None) -> None:
        self.tracker = tracker or Tracker()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.tracker))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.tracker.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        """Shut the server down and wait for its thread."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

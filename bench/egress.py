"""Added latency of the egress guard per request.

Prints median and p95 in microseconds for:
  check    the guard's own work (host reading, stub resolution, range check) for one URL;
  direct   a full loopback GET through a plain httpx transport (no guard);
  guarded  the same GET through EgressTransport (allowed by name, stub resolver).

Run: .venv/bin/python bench/egress.py [iterations]
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from proctor.runtime.boundary.egress import (
    EgressAllow,
    StaticResolver,
    canonical_url,
)
from proctor.runtime.boundary.transport import EgressTransport


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # otherwise delayed ACKs add ~40 ms to every reply

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _measure(fn: Callable[[], object], n: int) -> tuple[float, float]:
    for _ in range(min(50, n)):
        fn()
    samples = []
    for _ in range(n):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    port = server.server_address[1]
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    ).start()
    resolver = StaticResolver({"svc.bench": ["127.0.0.1"], "public.bench": ["93.184.215.14"]})
    guard = EgressTransport(allow=EgressAllow.parse(["svc.bench"]), resolver=resolver)
    public = httpx.URL("https://public.bench/path?q=1")

    def check() -> None:
        guard.check(canonical_url(str(public)))

    direct = httpx.Client(transport=httpx.HTTPTransport(), trust_env=False)
    guarded = httpx.Client(transport=guard, trust_env=False)
    rows = [
        ("check", _measure(check, n)),
        ("direct", _measure(lambda: direct.get(f"http://127.0.0.1:{port}/"), n)),
        ("guarded", _measure(lambda: guarded.get(f"http://svc.bench:{port}/"), n)),
    ]
    print(f"egress guard, {n} iterations (microseconds)")
    for name, (median, p95) in rows:
        print(f"  {name:8s} median {median:9.1f}  p95 {p95:9.1f}")
    added = rows[2][1][0] - rows[1][1][0]
    print(
        f"  added per request (guarded - direct, median): {added:.1f} us "
        f"({rows[2][1][0] / rows[1][1][0]:.2f}x)"
    )
    direct.close()
    guarded.close()
    server.shutdown()


if __name__ == "__main__":
    main()

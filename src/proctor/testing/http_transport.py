"""The httpx side of the HTTP stand-in: the transport a test's egress guard hands checked
requests to (:mod:`proctor.testing.http` decides what answers them), and how the URL a
request was made for is read back from what the guard dials.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from proctor.runtime.boundary.egress import canonical_url

__all__ = ["FixtureTransport", "original_url"]

Answer = Callable[[str, str, bytes, str | None], tuple[int, dict[str, str], bytes]]


def original_url(request: httpx.Request) -> httpx.URL:
    """The URL a checked request was made for: the guard dials the checked address itself,
    with the name kept in the ``Host`` header.

    Raises:
        EgressRefused: the rebuilt URL is not one proctor would request.
    """
    host = request.headers.get("host") or request.url.netloc.decode("ascii")
    raw_path = request.url.raw_path.decode("ascii")
    return canonical_url(f"{request.url.scheme}://{host}{raw_path}")


class FixtureTransport(httpx.BaseTransport):
    """Answers checked requests from a test's exchanges; never opens a socket."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Answer ``request`` from the declared exchanges.

        Raises:
            RefusedCall: (``http_fixture_unmatched``) no exchange matches.
        """
        content = request.read()
        status, headers, body = self.answer(
            request.method,
            str(original_url(request)),
            content,
            request.headers.get("authorization"),
        )
        # A stream, not content=: the response carries exactly the declared headers (httpx
        # would add a Content-Length the recorded run never saw).
        return httpx.Response(status, headers=headers, stream=httpx.ByteStream(body))

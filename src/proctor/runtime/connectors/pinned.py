"""The egress guard pinned to one origin: an httpx transport in front of the egress transport.

Kept apart from :mod:`.operations` so that building a run's operation tools never imports
httpx; a call does.
"""

from __future__ import annotations

import httpx

from proctor.errors import EgressRefused, ParseError
from proctor.parser.connector import connector_origin

__all__ = ["PinnedTransport"]


class PinnedTransport(httpx.BaseTransport):
    """Refuses any request (a redirect hop included) whose origin is not ``origin``, before
    the inner transport (the egress guard) resolves or dials anything.

    Raises (from :meth:`handle_request`):
        EgressRefused: ``egress_refused`` naming the refused host and the pinned origin.
    """

    def __init__(self, inner: httpx.BaseTransport, origin: str) -> None:
        self.inner = inner
        self.origin = origin

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Check the request's origin, then hand it to the egress guard."""
        url = request.url
        try:
            here = connector_origin(str(url.copy_with(query=None, fragment=None)))
        except ParseError:
            here = ""
        if here != self.origin:
            raise EgressRefused(
                f"an operation sends only to its connector's origin {self.origin};"
                f" {url.scheme}://{url.host}:{url.port or ''} is refused",
                code="egress_refused",
                details={"host": url.host, "origin": self.origin},
            )
        return self.inner.handle_request(request)

    def close(self) -> None:
        """Close the inner transport."""
        self.inner.close()

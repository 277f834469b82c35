"""The HTTP stand-in: declared exchanges answer, anything else is refused, nothing is dialled.

A test's session gets an :class:`~proctor.runtime.boundary.egress.EgressRoute` whose pool is a
:class:`FixtureTransport`. ``http.request`` runs as in any run: admission, the approval floor,
credential delivery, then the egress guard (scheme, userinfo, the allow-list, the address
check) on every hop; only the checked request, instead of reaching a connection pool, is
answered here. So a skill that calls a private address is refused in its test exactly as it
would be live, and a test cannot make the guard look kinder than it is.

Names resolve to :data:`FIXTURE_ADDRESS`, a public address, so they pass the address check
as a public name would; nothing is ever sent to it (no socket exists on this road).

Matching (:meth:`HttpFixtures.answer`): the exact method, the canonical final URL (as
:func:`~proctor.runtime.boundary.egress.canonical_url` reads it) and the body identity
(``none``, ``{json: VALUE}`` compared structurally with types, ``{text: ...}`` exactly). A
request declared several times is answered by those exchanges in declaration order, the last
answering every later repeat. A request no exchange matches is refused as a call
(``http_fixture_unmatched``) and listed, and fails the test; an exchange never requested fails
it too.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

from proctor.contracts.testfile import HttpExchange, JsonBody, TextBody
from proctor.contracts.values import dataclass, field
from proctor.errors import ProctorError, RefusedCall, UsageError
from proctor.runtime.boundary.egress import EgressAllow, EgressRoute, canonical_url

__all__ = ["FIXTURE_ADDRESS", "HttpFixtures", "same_json"]

FIXTURE_ADDRESS = "93.184.215.14"
"""What every name resolves to in a test: public (IANA's), so the guard checks it as it would
a public name; never dialled."""


def _resolve(host: str, port: int) -> Sequence[str]:
    return [FIXTURE_ADDRESS]


def same_json(a: Any, b: Any) -> bool:
    """JSON equality with types: ``true`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@dataclass(frozen=True)
class _Declared:
    method: str
    url: str
    body: Any  # "none", ("json", value) or ("text", str)
    status: int
    headers: dict[str, str]
    content: bytes


def _identity(spec: HttpExchange) -> Any:
    body = spec.request.body
    if isinstance(body, JsonBody):
        return ("json", body.json_)
    if isinstance(body, TextBody):
        return ("text", body.text)
    return "none"


@dataclass
class HttpFixtures:
    """A test's declared exchanges and what the run asked of them.

    Attributes:
        counts: how many requests each exchange answered, in declaration order.
        unmatched: the requests no exchange matched (method, URL, body kind), in order.
        authorizations: the ``Authorization`` header of each answered request (or ``None``).
        allow: the test's ``setup.egress``: destinations the guard accepts on this route as a
            workspace's allow-list would live (the route dials nothing).
    """

    declared: list[_Declared]
    allow: EgressAllow | None = None
    counts: list[int] = field(default_factory=list)
    unmatched: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_exchanges(cls, exchanges: Sequence[HttpExchange], source: str) -> HttpFixtures:
        """Read the declared exchanges, their URLs canonical as the egress guard reads them.

        Raises:
            UsageError: (``test_exchange_invalid``) an exchange URL proctor would never request
                (not http/https, userinfo, an invalid host).
        """
        declared = []
        for index, spec in enumerate(exchanges):
            try:
                url = str(canonical_url(spec.request.url))
            except ProctorError as exc:
                raise UsageError(
                    f"{source}: providers.http[{index}].request.url is not a URL proctor "
                    f"requests: {exc.message}",
                    code="test_exchange_invalid",
                ) from exc
            declared.append(
                _Declared(
                    method=spec.request.method,
                    url=url,
                    body=_identity(spec),
                    status=spec.response.status,
                    headers=dict(spec.response.headers),
                    content=spec.response.body.encode("utf-8"),
                )
            )
        return cls(declared, counts=[0] * len(declared))

    def route(self) -> EgressRoute:
        """The session's egress route: the guard, then these exchanges."""

        def pool(_verify: Any) -> Any:
            # httpx (~100 ms to import) only once a request is made
            from proctor.testing.http_transport import FixtureTransport

            return FixtureTransport(self.answer)

        return EgressRoute(resolver=_resolve, pool_factory=pool, allow=self.allow)

    def answer(
        self, method: str, url: str, content: bytes, authorization: str | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """The status, headers and body of the exchange that answers this request.

        ``authorization`` (the header the request carried) is kept in :attr:`authorizations`
        for the runner's own tests of delivery; it is never reported.

        Raises:
            RefusedCall: (``http_fixture_unmatched``) no exchange matches; nothing is sent.
        """
        with self._lock:
            matching = [
                i
                for i, d in enumerate(self.declared)
                if d.method == method and d.url == url and _body_matches(d.body, content)
            ]
            if not matching:
                self.unmatched.append({"method": method, "url": url, "body": _body_kind(content)})
                raise RefusedCall(
                    f"no providers.http exchange of this test matches {method} "
                    f"{url.split('?', 1)[0]} ({_body_kind(content)} body); "
                    "a test sends nothing to the network",
                    code="http_fixture_unmatched",
                )
            self.authorizations.append(authorization)
            fresh = [i for i in matching if self.counts[i] == 0]
            index = fresh[0] if fresh else matching[-1]
            self.counts[index] += 1
            chosen = self.declared[index]
        return chosen.status, dict(chosen.headers), chosen.content


def _body_kind(content: bytes) -> str:
    if not content:
        return "no"
    try:
        json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return "a text"
    return "a JSON"


def _body_matches(expected: Any, content: bytes) -> bool:
    if expected == "none":
        return not content
    kind, value = expected
    if kind == "text":
        try:
            return bool(content.decode("utf-8") == value)
        except UnicodeDecodeError:
            return False
    try:
        sent = json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return False
    return same_json(sent, value)

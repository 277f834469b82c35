"""The one road model traffic takes: a client pinned to the configured endpoint.

:class:`ModelClient` sends every request of a managed agent. It is built for one endpoint and
refuses every other origin before anything is sent. The endpoint's host is resolved once, when
the client is built, and only those addresses are dialled afterwards (so a name cannot be
re-pointed between requests). It is the only destination in proctor allowed past the egress
guard's deny ranges, so a model served on loopback works, while tools keep the full guard: model
traffic never goes through a tool and a tool never reaches the model endpoint by this road.

Bounds: a per-request timeout (no retry: a request that timed out may have been processed),
bounded retries after 429 and 5xx with exponential backoff (``Retry-After`` honoured up to the
cap; the sleep is injected so tests never wait), and cancellation that abandons an in-flight
request at once. A provider error becomes an :class:`AgentError` carrying the HTTP status and
the provider's own message (scrubbed of secrets and shortened), never the raw body or the key.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from proctor.contracts.values import dataclass
from proctor.errors import AgentError, EgressRefused, ParseError
from proctor.runtime.agents.wire import read_document

__all__ = ["CancelToken", "ModelClient", "RetryPolicy"]

_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
_MESSAGE_MAX = 300
_RESPONSE_MAX = 8 * 1024 * 1024


class CancelToken:
    """Cancellation shared by a run's signal handler and its agent loop.

    :meth:`cancel` may be called from any thread (or a signal handler); everything waiting on
    the token wakes at once.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._wakers: list[threading.Event] = []
        self.reason = "cancelled"

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel: every wait on this token returns now."""
        self.reason = reason
        self._event.set()
        with self._lock:
            wakers = list(self._wakers)
        for waker in wakers:
            waker.set()

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Wait up to ``seconds``; returns True when cancelled."""
        return self._event.wait(seconds)

    def _attach(self, waker: threading.Event) -> None:
        with self._lock:
            self._wakers.append(waker)
        if self._event.is_set():
            waker.set()

    def _detach(self, waker: threading.Event) -> None:
        with self._lock:
            if waker in self._wakers:
                self._wakers.remove(waker)

    def check(self) -> None:
        """Raise if cancelled.

        Raises:
            AgentError: (``agent_cancelled``) the token was cancelled.
        """
        if self.cancelled:
            raise AgentError(
                f"the agent turn was cancelled ({self.reason})", code="agent_cancelled"
            )


@dataclass(frozen=True)
class RetryPolicy:
    """Retries after 429/5xx: ``max_retries`` more attempts, waiting ``base_s * 2**n`` (capped
    at ``cap_s``; a ``Retry-After`` of at most ``cap_s`` seconds is used instead)."""

    max_retries: int = 2
    base_s: float = 0.5
    cap_s: float = 20.0

    def delay(self, attempt: int, retry_after: str | None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        if retry_after is not None:
            try:
                seconds = float(retry_after)
            except ValueError:
                seconds = -1.0
            if 0 <= seconds <= self.cap_s:
                return seconds
        return float(min(self.cap_s, self.base_s * (2**attempt)))


def _pinned_transport(
    endpoint: httpx.URL,
    resolver: Callable[[str, int], Any] | None,
    pool_factory: Callable[[Any], httpx.BaseTransport] | None = None,
) -> Any:
    from proctor.core.netaddr import HostName, parse_host
    from proctor.runtime.boundary.egress import (
        EgressAllow,
        StaticResolver,
        SystemResolver,
    )
    from proctor.runtime.boundary.transport import EgressTransport

    host_text = endpoint.raw_host.decode("ascii", "replace")
    shown = f"[{host_text}]" if ":" in host_text else host_text
    host = parse_host(shown)
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    if isinstance(host, HostName):
        try:
            addresses = list((resolver or SystemResolver())(host.canonical, port))
        except OSError as exc:
            raise AgentError(
                f"the model endpoint's host {host.canonical} does not resolve",
                code="provider_unreachable",
            ) from exc
        if not addresses:
            raise AgentError(
                f"the model endpoint's host {host.canonical} resolved to no address",
                code="provider_unreachable",
            )
        # Resolved once, here: every later request dials exactly these addresses.
        return EgressTransport(
            allow=EgressAllow(hosts=frozenset({host.canonical})),
            resolver=StaticResolver({host.canonical: addresses}),
            pool_factory=pool_factory,
        )
    return EgressTransport(allow=EgressAllow.parse([shown]), pool_factory=pool_factory)


class ModelClient:
    """Sends JSON requests to one model endpoint and nowhere else.

    Args:
        endpoint_url: the API base (``https://host/v1``); requests go to paths under it.
        timeout_s: per-request timeout.
        retry: retry policy after 429/5xx.
        sleep: how to wait between retries (injected in tests; default waits on ``cancel``).
        cancel: cancellation token.
        resolver: resolves the endpoint's host once (default: the system resolver).
        secrets: values scrubbed from provider messages (the API key).
        pool_factory: what a checked request is handed to (default: a connection pool);
            ``proctor test`` answers from scripted responses instead.

    Raises:
        AgentError: (``provider_unreachable``) the endpoint's host does not resolve.
    """

    def __init__(
        self,
        endpoint_url: str,
        *,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] | None = None,
        cancel: CancelToken | None = None,
        resolver: Callable[[str, int], Any] | None = None,
        secrets: Iterable[str | None] = (),
        pool_factory: Callable[[Any], httpx.BaseTransport] | None = None,
    ) -> None:
        from proctor.runtime.boundary.sanitize import TaintSet

        # The key itself is scrubbed from any provider message, whatever its shape.
        self.taint = TaintSet(s for s in secrets if s)
        self.endpoint = httpx.URL(endpoint_url.rstrip("/"))
        self.retry = retry or RetryPolicy()
        self.cancel = cancel or CancelToken()
        self.sleep = sleep or self._wait
        self.requests_sent = 0
        self._client = httpx.Client(
            transport=_pinned_transport(self.endpoint, resolver, pool_factory),
            timeout=httpx.Timeout(timeout_s),
            follow_redirects=False,
            trust_env=False,
        )

    def _wait(self, seconds: float) -> None:
        self.cancel.wait(seconds)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def url_for(self, path: str) -> httpx.URL:
        """The URL of ``path`` under the endpoint."""
        return httpx.URL(str(self.endpoint) + path)

    def _check_origin(self, url: httpx.URL) -> None:
        same = (
            url.scheme == self.endpoint.scheme
            and url.host == self.endpoint.host
            and url.port == self.endpoint.port
            and url.path.startswith(self.endpoint.path.rstrip("/") + "/")
        )
        if not same:
            raise EgressRefused(
                "model traffic may only go to the configured agent endpoint",
                code="model_endpoint_only",
            )

    def post(
        self,
        path: str,
        body: dict[str, Any],
        headers: dict[str, str],
        error_message: Callable[[Any], str | None],
    ) -> Any:
        """POST ``body`` to ``path`` under the endpoint and return the decoded JSON answer.

        Raises:
            EgressRefused: the URL is not under the configured endpoint (nothing sent).
            AgentError: ``provider_error`` (a non-2xx answer after retries, with ``status`` and
                ``provider_message`` in details), ``provider_timeout``,
                ``provider_unreachable``, ``provider_malformed`` (2xx but not JSON, or too
                large), ``duplicate_key`` / ``too_deep`` (2xx JSON the strict reader
                refuses: a key repeated in one object, nesting deeper than 64),
                ``agent_cancelled``.
        """
        url = self.url_for(path)
        self._check_origin(url)
        content = json.dumps(body).encode("utf-8")
        request_headers = {"content-type": "application/json", "accept": "application/json"}
        request_headers.update(headers)
        attempt = 0
        while True:
            self.cancel.check()
            response = self._send(url, content, request_headers)
            status = response.status_code
            if 200 <= status < 300:
                return _decode(response)
            if status in _RETRY_STATUSES and attempt < self.retry.max_retries:
                delay = self.retry.delay(attempt, response.headers.get("retry-after"))
                attempt += 1
                self.sleep(delay)
                continue
            raise _provider_error(response, error_message, attempts=attempt + 1, taint=self.taint)

    def _send(self, url: httpx.URL, content: bytes, headers: dict[str, str]) -> httpx.Response:
        done = threading.Event()
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                with self._client.stream("POST", url, content=content, headers=headers) as resp:
                    chunks: list[bytes] = []
                    size = 0
                    for chunk in resp.iter_bytes():
                        size += len(chunk)
                        if size > _RESPONSE_MAX:
                            box["too_large"] = True
                            break
                        chunks.append(chunk)
                    box["response"] = httpx.Response(
                        resp.status_code, headers=resp.headers, content=b"".join(chunks)
                    )
            except BaseException as exc:  # handed to the waiting thread below
                box["error"] = exc
            finally:
                done.set()

        self.requests_sent += 1
        self.cancel._attach(done)
        worker = threading.Thread(target=work, name="proctor-model-request", daemon=True)
        worker.start()
        try:
            done.wait()
        finally:
            self.cancel._detach(done)
        if "response" not in box and "error" not in box and self.cancel.cancelled:
            # The request is abandoned: its thread ends when the server answers or the
            # timeout fires; its answer is never read.
            self.cancel.check()
        error = box.get("error")
        if isinstance(error, EgressRefused):
            raise error
        if isinstance(error, httpx.TimeoutException):
            raise AgentError(
                "the model provider did not answer within the per-request timeout",
                code="provider_timeout",
            ) from error
        if isinstance(error, httpx.TransportError):
            raise AgentError(
                "the model provider could not be reached", code="provider_unreachable"
            ) from error
        if error is not None:
            raise error
        if box.get("too_large"):
            raise AgentError("the model provider's answer is too large", code="provider_malformed")
        response: httpx.Response = box["response"]
        return response


def _decode(response: httpx.Response) -> Any:
    try:
        return read_document(response.content)
    except ParseError as exc:
        if exc.code in ("duplicate_key", "too_deep"):
            # JSON that two readers could take two ways (or that nests past any answer's
            # need) is refused by the strict reader's code, not taken one way.
            raise AgentError(
                f"the model provider answered HTTP {response.status_code} with a body that"
                f" {exc.message.partition(': ')[2]}",
                code=exc.code,
                details={"status": response.status_code},
            ) from None
        raise AgentError(
            f"the model provider answered HTTP {response.status_code} with a body that is not JSON",
            code="provider_malformed",
            details={"status": response.status_code},
        ) from exc


def _provider_error(
    response: httpx.Response,
    error_message: Callable[[Any], str | None],
    *,
    attempts: int,
    taint: Any,
) -> AgentError:
    from proctor.runtime.boundary.sanitize import scrub_text

    status = response.status_code
    message: str | None = None
    try:
        message = error_message(read_document(response.content))
    except ParseError:
        message = None
    if message is not None:
        message = " ".join(scrub_text(message, taint).split())
        if len(message) > _MESSAGE_MAX:
            message = message[: _MESSAGE_MAX - 1] + "…"
    shown = message if message else "(no error message in the provider's answer)"
    return AgentError(
        f"the model provider answered HTTP {status}: {shown}",
        code="provider_error",
        details={"status": status, "provider_message": message, "attempts": attempts},
    )

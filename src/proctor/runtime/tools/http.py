"""``http.request``: one HTTP call through the egress guard, with credential delivery by name.

The handler reads its network context from ``ctx.extras["network"]`` (a
:class:`NetworkContext` the driver builds once per command: the workspace's egress allow-list,
the credentials resolved for the step, the run's taint set). Without one it uses the
workspace's ``proctor.toml`` allow-list, the system resolver and no credentials.

A credential is delivered only here, into the ``Authorization`` header of the outgoing request;
it is never part of the arguments, the result or a message. A caller-supplied
``Authorization`` header is refused: credentials are named, not pasted.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from proctor.contracts.values import dataclass, field
from proctor.errors import CredentialError, RefusedCall, ToolFailed
from proctor.runtime.boundary.egress import (
    EgressAllow,
    EgressLimits,
    Resolver,
    SystemResolver,
    canonical_url,
    load_egress_allow,
)
from proctor.runtime.tools.base import Tool, ToolContext

if TYPE_CHECKING:
    import ssl

    import httpx

    from proctor.runtime.boundary.sanitize import TaintSet
    from proctor.runtime.home.credentials.model import ResolvedCredential

__all__ = [
    "HTTP_REQUEST",
    "NETWORK_EXTRA",
    "NetworkContext",
    "http_tools",
    "network_deliver",
    "send",
]

NETWORK_EXTRA = "network"
"""The ``ToolContext.extras`` key holding the :class:`NetworkContext`."""

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# Headers the caller may not set: credentials are delivered by name, and the request's framing
# and destination are proctor's to decide.
_REFUSED_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "host", "content-length", "transfer-encoding",
     "connection", "te", "upgrade"}
)  # fmt: skip
# Response headers a result may carry; anything else (Set-Cookie, auth challenges, tracing
# internals) stays out of the run record.
RESULT_HEADERS = frozenset(
    {"content-type", "content-length", "content-language", "location", "etag",
     "last-modified", "cache-control", "expires", "retry-after", "date", "link", "allow",
     "x-request-id", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"}
)  # fmt: skip


@dataclass
class NetworkContext:
    """What ``http.request`` needs beyond its arguments, built by the driver per command.

    Attributes:
        allow: the workspace's egress allow-list (recorded in the run's authority).
        credentials: the credentials resolved for this step, by requirement name.
        default_credential: the step's ``credential:``; delivered when the call names none.
        taint: the run's taint set; every delivered value is added to it.
        resolver: name resolution (tests inject a
            :class:`proctor.runtime.boundary.egress.StaticResolver`).
        verify: TLS verification (``True`` or a context with extra roots, for tests).
        limits: time, size and redirect bounds.
        pool_factory: see :class:`proctor.runtime.boundary.transport.EgressTransport` (tests only).
        aliases: resolves a credential alias when the call is made (a directive run's
            ``auth_alias``, :mod:`proctor.runtime.home.credentials.aliases`); ``None``: a call
            may name only the step's declared credential.
    """

    allow: EgressAllow = field(default_factory=EgressAllow)
    credentials: Mapping[str, ResolvedCredential] = field(default_factory=dict)
    default_credential: str | None = None
    taint: TaintSet | None = None
    resolver: Resolver = field(default_factory=SystemResolver)
    verify: ssl.SSLContext | bool = True
    limits: EgressLimits = field(default_factory=EgressLimits)
    pool_factory: Callable[[ssl.SSLContext | bool], httpx.BaseTransport] | None = None
    aliases: Callable[[str], ResolvedCredential | None] | None = None


SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["method", "url"],
    "properties": {
        "method": {"type": "string", "enum": list(METHODS)},
        "url": {"type": "string", "minLength": 1, "maxLength": 8192},
        "headers": {
            "type": "object",
            "additionalProperties": {"type": "string", "maxLength": 8192},
            "maxProperties": 64,
        },
        "json": {},
        "body": {"type": "string", "maxLength": 4 * 1024 * 1024},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 300},
        "auth": {
            "type": "object",
            "additionalProperties": False,
            "required": ["credential"],
            "properties": {
                "credential": {"type": "string", "minLength": 1, "maxLength": 128},
                # the reference kernel's auth_scheme: the value follows the scheme as it is
                "scheme": {"enum": ["Bearer", "Basic", "Token"]},
            },
        },
    },
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["status", "headers", "body", "truncated", "body_digest", "redirects"],
    "properties": {
        "status": {"type": "integer"},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "body": {"type": "string"},
        "truncated": {"type": "boolean"},
        "body_digest": {"type": "string"},
        "redirects": {"type": "integer"},
        "auth_source": {
            "type": "object",
            "description": "where a credential alias resolved (a directive run's auth_alias)",
        },
    },
}


def _credential(net: NetworkContext, args: Mapping[str, Any]) -> ResolvedCredential | None:
    auth = args.get("auth")
    name = auth["credential"] if isinstance(auth, Mapping) else net.default_credential
    if name is None:
        return None
    credential = net.credentials.get(name)
    if credential is None and net.aliases is not None and isinstance(auth, Mapping):
        credential = net.aliases(name)
        if credential is None:
            raise CredentialError(
                f"credential alias {name!r} is not configured: store a profile named {name!r}"
                f" (proctor credential set), bind one to it, or set AURO_SECRET_{name.upper()}",
                code="credential_not_delivered",
                details={"credential": name},
            )
    if credential is None:
        raise CredentialError(
            f"credential {name!r} was not resolved for this step; declare it in run.yaml and "
            "name it with the step's credential:",
            code="credential_not_delivered",
            details={"credential": name},
        )
    return credential


def _audience_allows(credential: ResolvedCredential, url: httpx.URL) -> bool:
    import httpx

    if credential.audience is None:
        return True
    audience = httpx.URL(credential.audience)
    return (
        url.scheme == "https"
        and url.raw_host.lower() == audience.raw_host.lower()
        and (url.port or 443) == (audience.port or 443)
    )


def send(
    client: httpx.Client,
    request: httpx.Request,
    *,
    limits: EgressLimits,
    deadline: float,
) -> tuple[httpx.Response, bytes, bool, int]:
    """Send ``request``, following at most ``limits.max_redirects`` redirects, and read the body.

    Each hop is a new request through the client's transport, so each is checked; httpx's
    redirect builder drops ``Authorization`` when the origin changes. Returns the final
    response (closed), at most ``limits.max_response_bytes`` of its body, whether the body was
    cut, and the number of redirects followed.

    Raises:
        EgressRefused: a hop's destination was refused (nothing was sent to it).
        ToolFailed: too many redirects (``http_too_many_redirects``), the total time ran out
            (``http_timeout``), or the connection failed (``http_transport_error``).
    """
    import httpx

    redirects = 0
    try:
        while True:
            response = client.send(request, stream=True)
            nxt = response.next_request if response.is_redirect else None
            if nxt is None:
                break
            response.close()
            redirects += 1
            if redirects > limits.max_redirects:
                raise ToolFailed(
                    f"more than {limits.max_redirects} redirects",
                    code="http_too_many_redirects",
                )
            if time.monotonic() > deadline:
                raise ToolFailed("the request ran out of time", code="http_timeout")
            request = nxt
        body = bytearray()
        truncated = False
        try:
            for chunk in response.iter_bytes():
                room = limits.max_response_bytes - len(body)
                if len(chunk) > room:
                    body += chunk[:room]
                    truncated = True
                    break
                body += chunk
                if time.monotonic() > deadline:
                    raise ToolFailed("the response ran out of time", code="http_timeout")
        finally:
            response.close()
    except httpx.TimeoutException as exc:
        raise ToolFailed("the request timed out", code="http_timeout") from exc
    except httpx.TransportError as exc:
        # The exception text can carry the URL (and with it a query token); name the class only.
        raise ToolFailed(
            f"the connection failed ({type(exc).__name__})", code="http_transport_error"
        ) from exc
    return response, bytes(body), truncated, redirects


def _network(ctx: ToolContext) -> NetworkContext:
    net = ctx.extras.get(NETWORK_EXTRA)
    if isinstance(net, NetworkContext):
        return net
    return NetworkContext(allow=load_egress_allow(ctx.workspace.root))


def _request(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    # httpx (~100 ms to import) is loaded by the first call, not when the registry builds the
    # tool: a run that sends nothing never pays for it.
    import httpx

    from proctor.runtime.boundary.transport import EgressTransport

    net = _network(ctx)
    url = canonical_url(args["url"])
    headers: dict[str, str] = {}
    for key, value in (args.get("headers") or {}).items():
        if key.lower() in _REFUSED_HEADERS:
            code = "raw_credential" if "authorization" in key.lower() else "header_refused"
            raise RefusedCall(
                f"header {key!r} may not be set by a call"
                + (
                    "; deliver a credential with auth: {credential: NAME}"
                    if code == "raw_credential"
                    else ""
                ),
                code=code,
                details={"header": key},
            )
        headers[key] = value
    if "json" in args and "body" in args:
        raise RefusedCall("give json or body, not both", code="http_body_ambiguous")
    credential = _credential(net, args)
    if credential is not None:
        if not _audience_allows(credential, url):
            raise CredentialError(
                f"credential {credential.name!r} is bound to {credential.audience}; "
                f"it is not sent to {url.host}",
                code="credential_audience_mismatch",
                details={"credential": credential.name, "host": url.host},
            )
        if net.taint is not None:
            net.taint.add(credential.secret.reveal())
        scheme = (args.get("auth") or {}).get("scheme")
        headers["Authorization"] = (
            f"{scheme} {credential.secret.reveal()}" if scheme else credential.authorization()
        )
    limits = net.limits
    total = min(float(args.get("timeout_s", limits.total_s)), limits.total_s)
    deadline = time.monotonic() + total
    timeout = httpx.Timeout(min(limits.read_s, total), connect=min(limits.connect_s, total))
    transport = EgressTransport(
        allow=net.allow, resolver=net.resolver, verify=net.verify, pool_factory=net.pool_factory
    )
    with httpx.Client(
        transport=transport, follow_redirects=False, trust_env=False, timeout=timeout
    ) as client:
        request = client.build_request(
            args["method"],
            url,
            headers=headers,
            json=args.get("json"),
            content=args["body"].encode("utf-8") if "body" in args else None,
        )
        response, body, truncated, redirects = send(
            client, request, limits=limits, deadline=deadline
        )
    try:
        text = body.decode(response.encoding or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        text = body.decode("utf-8", errors="replace")
    if net.taint is not None:
        text = net.taint.scrub(text)
    return {
        "status": response.status_code,
        "headers": {k: v for k, v in response.headers.items() if k.lower() in RESULT_HEADERS},
        "body": text,
        "truncated": truncated,
        "body_digest": "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "redirects": redirects,
        **_alias_note(net, credential),
    }


def _alias_note(net: NetworkContext, credential: ResolvedCredential | None) -> dict[str, Any]:
    """Where a credential alias resolved (recorded with the call; never the value)."""
    if credential is None or credential.name in net.credentials or net.aliases is None:
        return {}
    note = {"alias": credential.name, "source": credential.source, "profile": credential.profile}
    return {"auth_source": note}


HTTP_REQUEST = Tool(
    name="http.request",
    description=(
        "Send one HTTP(S) request to a public destination (or one the workspace allows) and "
        "return its status, selected headers and a bounded body."
    ),
    schema=SCHEMA,
    effect="network",
    handler=_request,
    output_schema=OUTPUT_SCHEMA,
)


def http_tools() -> dict[str, Tool]:
    """The network tools, by name, for the registry."""
    return {HTTP_REQUEST.name: HTTP_REQUEST}


def network_deliver(
    credentials: Mapping[str, ResolvedCredential],
    step_credentials: Mapping[str, str | None],
    *,
    allow: EgressAllow,
    taint: TaintSet | None,
    resolver: Resolver | None = None,
    verify: ssl.SSLContext | bool = True,
    limits: EgressLimits | None = None,
    pool_factory: Callable[[ssl.SSLContext | bool], httpx.BaseTransport] | None = None,
) -> Callable[[Any, Tool], dict[str, Any]]:
    """The admission ``deliver`` seam for network tools.

    ``credentials`` is what :func:`proctor.runtime.home.credentials.resolve_credentials` returned
    for the command; ``step_credentials`` maps a step id to its ``credential:``. A call gets
    only its own step's credential, so a step that declares none can deliver none.
    ``resolver`` and ``pool_factory`` route checked requests elsewhere (an
    :class:`~proctor.runtime.boundary.egress.EgressRoute`: ``proctor test``).
    """

    def deliver(spec: Any, tool: Tool) -> dict[str, Any]:
        if tool.effect != "network":
            return {}
        name = step_credentials.get(getattr(spec, "step_id", None) or "")
        own = {name: credentials[name]} if name is not None and name in credentials else {}
        return {
            NETWORK_EXTRA: NetworkContext(
                allow=allow,
                credentials=own,
                default_credential=name,
                taint=taint,
                resolver=resolver or SystemResolver(),
                verify=verify,
                limits=limits or EgressLimits(),
                pool_factory=pool_factory,
            )
        }

    return deliver

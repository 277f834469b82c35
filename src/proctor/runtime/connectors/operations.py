"""A connector's operations as tools: ``operation:<connector>/<op>``.

An :class:`OperationTool` is a :class:`~proctor.runtime.tools.base.Tool` whose arguments are
the operation's declared ``inputs`` (plus ``idempotency_key`` for a write), so admission holds
it to the same path as every other call: scope, schema, policy (a rule's ``tools`` may name
``operation:<c>/<op>``), the floor, budgets, delivery, the record. What it adds:

- the request is built from the manifest's template only: path placeholders are sent
  percent-encoded (an input never leaves its path segment), the base URL is the connector's;
- the egress guard is pinned to the connector's origin: every hop (redirects included) to any
  other scheme, host or port is refused before anything is sent, and the workspace's egress
  rules still apply to the origin itself;
- the connector's credential is added here, at the adapter, into ``Authorization``; it never
  appears in arguments, results, refusals or records (and enters the run's taint set);
- a write sends its provider key (:func:`provider_key`) as ``Idempotency-Key``;
- a write's ``readback`` (:func:`readback_of`, :func:`readback_matches`) is what a crashed
  write is reconciled by; :func:`cost_quote` is the operation's declared price per call.

An operation of an MCP connector (``mcp: <server>``) calls one upstream tool instead of
sending a request: its ``arguments`` are built from the template alone, and the call goes
through the :data:`McpCaller` the engine binds (the workspace's upstreams: rate limits, the
pinned definition, the server in its sandbox or behind the egress guard, the server's
credential delivered there and nowhere else, scrubbed from every answer). The operation's
``result`` pointers read the upstream's answer, ``{"content": [...], "structured_content":
{...}}``; the rest (scope, schema, the floor with the exact call, idempotency keys, readback)
is the same as for HTTP operations.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from proctor.contracts.connector import Connector, Operation
from proctor.contracts.values import dataclass
from proctor.errors import CredentialError, ToolFailed
from proctor.parser.connector import connector_origin
from proctor.parser.refs import Ref, parse_ref_string, resolve
from proctor.receipts.canonical import digest
from proctor.runtime.boundary.egress import EgressAllow, EgressLimits, Resolver, SystemResolver
from proctor.runtime.tools.base import (
    OPERATION_PREFIX,
    PACKAGE_EXTRA,
    OutcomeUnknown,
    Tool,
    ToolContext,
)
from proctor.runtime.tools.http import NETWORK_EXTRA, NetworkContext, send

if TYPE_CHECKING:
    import ssl

    import httpx

    from proctor.runtime.boundary.sanitize import TaintSet
    from proctor.runtime.connectors.catalog import LoadedConnector
    from proctor.runtime.home.credentials.model import ResolvedCredential

__all__ = [
    "IDEMPOTENCY_ARG",
    "OPERATION_PREFIX",
    "McpCaller",
    "OperationTool",
    "cost_quote",
    "expand_operations",
    "mcp_admit",
    "mcp_arguments",
    "operation_deliver",
    "operation_payload",
    "operation_tool_name",
    "operation_tools",
    "pointer_get",
    "provider_key",
    "quote_micro_usd",
    "quoted",
    "readback_matches",
    "readback_of",
]

IDEMPOTENCY_ARG = "idempotency_key"
_KEY_SCHEMA = {"type": "string", "minLength": 1, "maxLength": 256}
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_MISSING = object()


class McpCaller(Protocol):
    """How an MCP connector's operations reach their upstream server (the engine binds one)."""

    def admit(self, server: str, tool: str, arguments: Mapping[str, Any], verb: str) -> None:
        """Refuse, before anything is asked or sent, a call that could not be sent as it
        stands: the server is not configured, the tool is not pinned, a ``read`` stands for a
        changing tool, or ``arguments`` do not fit the tool's pinned ``inputSchema``.

        Raises:
            RefusedCall: with the problem's code (``schema_invalid`` for the arguments).
        """

    def call(
        self, server: str, tool: str, arguments: Mapping[str, Any], verb: str
    ) -> dict[str, Any]:
        """Send ``arguments`` to ``server``'s ``tool``: its answer ``{"content": [...],
        "structured_content": {...}}``, or raises (a refusal, a failure)."""
        ...


def operation_tool_name(connector: str, operation: str) -> str:
    """The tool name of an operation: ``operation:<connector>/<op>``."""
    return f"{OPERATION_PREFIX}{connector}/{operation}"


@dataclass(frozen=True)
class OperationTool(Tool):
    """A connector operation as a tool (see the module docstring).

    Attributes:
        connector / operation: the names as declared.
        spec: the operation as declared.
        base_url / origin: the connector's base URL and its ``scheme://host:port``
            (``mcp:<server>`` for an MCP connector, whose base URL is empty).
        credential: the credential requirement the connector names, if any.
        server: the upstream MCP server of an MCP connector, else ``None``.
        upstream: how an MCP operation reaches its server (bound by the engine).
    """

    connector: str = ""
    operation: str = ""
    spec: Operation | None = None
    base_url: str = ""
    origin: str = ""
    credential: str | None = None
    server: str | None = None
    upstream: McpCaller | None = None

    @property
    def is_write(self) -> bool:
        """True for a ``verb: write`` operation."""
        return self.spec is not None and self.spec.verb == "write"

    @property
    def approval_required(self) -> bool:
        """True when every call waits on a person's approval, whatever the run's effects."""
        return self.spec is not None and self.spec.approval == "required"

    def describe(self) -> dict[str, Any]:
        """The public description, with the connector, verb, approval and cost."""
        doc = super().describe()
        assert self.spec is not None
        doc.update(
            connector=self.connector,
            operation=self.operation,
            verb=self.spec.verb,
            origin=self.origin,
            approval=self.spec.approval,
            mcp=None
            if self.spec.mcp is None
            else {"server": self.server, "tool": self.spec.mcp.tool},
            readback=None if self.spec.readback is None else self.spec.readback.operation,
            cost=None if self.spec.cost is None else self.spec.cost.model_dump(),
        )
        return doc


def _schema(op: Operation) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(json.dumps(op.inputs))
    if op.verb == "write":
        schema.setdefault("properties", {})[IDEMPOTENCY_ARG] = dict(_KEY_SCHEMA)
        schema["required"] = [*schema.get("required", []), IDEMPOTENCY_ARG]
    return schema


def operation_tools(
    connectors: Mapping[str, LoadedConnector], upstream: McpCaller | None = None
) -> dict[str, OperationTool]:
    """Every operation of ``connectors`` as a tool, by tool name; ``upstream`` is how an MCP
    connector's operations reach their server (without it, each call fails
    ``mcp_upstream_unavailable``)."""
    tools: dict[str, OperationTool] = {}
    for loaded in connectors.values():
        c = loaded.connector
        for name, op in c.operations.items():
            tool = _tool(c, loaded.origin, name, op, upstream)
            tools[tool.name] = tool
    return tools


def _tool(
    c: Connector, origin: str, name: str, op: Operation, upstream: McpCaller | None
) -> OperationTool:
    holder: list[OperationTool] = []

    def handler(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        return _call(holder[0], ctx, args)

    tool = OperationTool(
        name=operation_tool_name(c.name, name),
        description=op.description or f"{op.verb} operation {name} of connector {c.name}",
        schema=_schema(op),
        effect="network" if op.verb == "write" else "read",
        handler=handler,
        connector=c.name,
        operation=name,
        spec=op,
        base_url=c.base_url or "",
        origin=origin,
        credential=c.credential,
        server=c.mcp,
        upstream=upstream if c.mcp is not None else None,
    )
    holder.append(tool)
    return tool


def expand_operations(patterns: list[str], tools: Mapping[str, Tool]) -> list[str]:
    """The operation tool names a turn's ``calls.operations`` offer: ``c/op`` exactly, or every
    operation of ``c`` for ``c/*``. A pattern naming nothing offers nothing."""
    out: list[str] = []
    names = sorted(n for n in tools if n.startswith(OPERATION_PREFIX))
    for pattern in patterns:
        if pattern.endswith("/*"):
            prefix = OPERATION_PREFIX + pattern[:-1]
            out.extend(n for n in names if n.startswith(prefix) and n not in out)
        elif (OPERATION_PREFIX + pattern) in tools and OPERATION_PREFIX + pattern not in out:
            out.append(OPERATION_PREFIX + pattern)
    return out


def provider_key(tool: OperationTool, key: str, package: str | None) -> str:
    """The key a write is claimed and found by, and sends as ``Idempotency-Key``: a digest of
    the run's package identity, the connector (its name and origin), the operation and the key,
    so one key used by two packages, two connectors of one name at two origins, or two
    operations names two acts."""
    return "op:" + digest(
        {
            "package": package,
            "connector": tool.connector,
            "origin": tool.origin,
            "operation": tool.operation,
            "key": key,
        }
    )


def cost_quote(tool: Tool) -> dict[str, Any] | None:
    """The operation's declared price (``{usd_micro, per}``), or ``None``."""
    if isinstance(tool, OperationTool) and tool.spec is not None and tool.spec.cost is not None:
        return tool.spec.cost.model_dump()
    return None


def quoted(tool: Tool) -> dict[str, Any]:
    """``{"quote": {usd_micro, per}}`` for a call record of a priced operation, else ``{}``."""
    quote_ = cost_quote(tool)
    return {} if quote_ is None else {"quote": quote_}


def quote_micro_usd(tool: Tool) -> int | None:
    """What one call of ``tool`` is quoted to cost, in millionths of a US dollar (the seam a
    spend ledger reserves against); ``None`` when the tool declares no cost."""
    quote_ = cost_quote(tool)
    return None if quote_ is None else int(quote_["usd_micro"])


def _inputs(args: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if k != IDEMPOTENCY_ARG}


def readback_of(tool: OperationTool, args: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The read that shows whether a write took effect: its tool name and arguments."""
    if tool.spec is None or tool.spec.readback is None:
        return None
    rb = tool.spec.readback
    return (
        operation_tool_name(tool.connector, rb.operation),
        resolve(dict(rb.inputs), _inputs(args), {}),
    )


def readback_matches(tool: OperationTool, args: Mapping[str, Any], result: Any) -> bool:
    """True when every pointer of the readback's ``match`` equals its value in ``result``
    (the read operation's ``result``)."""
    assert tool.spec is not None and tool.spec.readback is not None
    expected = resolve(dict(tool.spec.readback.match), _inputs(args), {})
    body = result.get("result") if isinstance(result, dict) else None
    return all(pointer_get(body, p) == v for p, v in expected.items())


def pointer_get(doc: Any, pointer: str) -> Any:
    """The value at a JSON pointer (RFC 6901), or a sentinel that equals nothing."""
    if pointer == "":
        return doc
    node = doc
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node


# -- sending ----------------------------------------------------------------------------


def _credential(tool: OperationTool, net: NetworkContext) -> ResolvedCredential | None:
    if tool.credential is None:
        return None
    credential = net.credentials.get(tool.credential)
    if credential is None:
        raise CredentialError(
            f"credential {tool.credential!r} of connector {tool.connector!r} was not delivered",
            code="credential_not_delivered",
            details={"credential": tool.credential},
        )
    if credential.audience is not None and connector_origin(credential.audience) != tool.origin:
        raise CredentialError(
            f"credential {credential.name!r} is bound to {credential.audience}; connector"
            f" {tool.connector!r} sends to {tool.origin}",
            code="credential_audience_mismatch",
            details={"credential": credential.name},
        )
    return credential


def _url(tool: OperationTool, inputs: dict[str, Any]) -> str:
    assert tool.spec is not None and tool.spec.request is not None

    def fill(match: re.Match[str]) -> str:
        value = inputs.get(match.group(1))
        if value is None or isinstance(value, dict | list):
            raise ToolFailed(
                f"path input {match.group(1)!r} must be a string or a number",
                code="operation_input_invalid",
            )
        return quote(str(value), safe="")

    path = _PLACEHOLDER.sub(fill, tool.spec.request.path)
    return tool.base_url.rstrip("/") + path


def _fill(template: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """A mapping's references resolved; a field that is exactly ``$input.NAME`` of an optional
    input left out is left out too (never sent as a null)."""
    out = {}
    for key, value in template.items():
        ref = parse_ref_string(value) if isinstance(value, str) else None
        if isinstance(ref, Ref) and ref.root == "input" and ref.name not in inputs:
            continue
        out[key] = resolve(value, inputs, {})
    return out


def _parts(tool: OperationTool, args: Mapping[str, Any]) -> tuple[str, dict[str, str], Any]:
    assert tool.spec is not None and tool.spec.request is not None
    request = tool.spec.request
    inputs = _inputs(args)
    query = {
        str(k): v if isinstance(v, str) else json.dumps(v)
        for k, v in _fill(dict(request.query), inputs).items()
        if v is not None
    }
    body = request.json_body
    body = _fill(body, inputs) if isinstance(body, dict) else resolve(body, inputs, {})
    return _url(tool, inputs), query, body


def operation_payload(
    tool: OperationTool, args: Mapping[str, Any], package: str | None = None
) -> dict[str, Any]:
    """What a person approving the call sees: exactly the request it sends, the credential
    named and never shown: the connector and its origin, method, URL, query, headers, JSON
    body, and for a write its idempotency key and the readback it is checked with.
    ``package`` is the run's package identity, which the sent ``Idempotency-Key`` is scoped by.

    Raises:
        ToolFailed: ``operation_input_invalid`` when a path input cannot be sent.
    """
    assert tool.spec is not None
    shown: dict[str, Any] = {
        "name": f"{tool.connector}/{tool.operation}",
        "connector": tool.connector,
        "operation": tool.operation,
        "origin": tool.origin,
        "verb": tool.spec.verb,
    }
    if tool.spec.mcp is not None:
        # the exact upstream call; the server's credential is its own [mcp.<server>] one,
        # added by the adapter that reaches it
        shown.update(
            server=tool.server,
            tool=tool.spec.mcp.tool,
            arguments=mcp_arguments(tool, args),
        )
        if tool.is_write and isinstance(args.get(IDEMPOTENCY_ARG), str):
            shown["provider_key"] = provider_key(tool, str(args[IDEMPOTENCY_ARG]), package)
    else:
        url, query, body = _parts(tool, args)
        headers = {"Accept": "application/json"}
        if tool.is_write and isinstance(args.get(IDEMPOTENCY_ARG), str):
            headers["Idempotency-Key"] = provider_key(tool, str(args[IDEMPOTENCY_ARG]), package)
        assert tool.spec.request is not None
        shown.update(
            method=tool.spec.request.method, url=url, query=query, headers=headers, json=body
        )
    if tool.credential is not None:
        # named, never shown: the adapter adds it as Authorization when the call is sent
        shown["credential_name"] = tool.credential
    if tool.is_write:
        shown["idempotency_key"] = args.get(IDEMPOTENCY_ARG)
        readback = readback_of(tool, args)
        if readback is not None and tool.spec.readback is not None:
            shown["readback"] = {
                "tool": readback[0],
                "args": readback[1],
                "match": resolve(dict(tool.spec.readback.match), _inputs(args), {}),
            }
    return {"operation": shown}


def _call(tool: OperationTool, ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    import httpx

    from proctor.runtime.boundary.egress import load_egress_allow
    from proctor.runtime.boundary.transport import EgressTransport
    from proctor.runtime.connectors.pinned import PinnedTransport

    assert tool.spec is not None
    if tool.spec.mcp is not None:
        return _call_mcp(tool, args)
    request = tool.spec.request
    assert request is not None
    net = ctx.extras.get(NETWORK_EXTRA)
    if not isinstance(net, NetworkContext):
        net = NetworkContext(allow=load_egress_allow(ctx.workspace.root))
    url, query, body = _parts(tool, args)
    headers = {"Accept": "application/json"}
    if tool.is_write:
        package = ctx.extras.get(PACKAGE_EXTRA)
        headers["Idempotency-Key"] = provider_key(
            tool, str(args[IDEMPOTENCY_ARG]), package if isinstance(package, str) else None
        )
    credential = _credential(tool, net)
    if credential is not None:
        if net.taint is not None:
            net.taint.add(credential.secret.reveal())
        headers["Authorization"] = credential.authorization()
    limits = net.limits
    deadline = time.monotonic() + limits.total_s
    inner = EgressTransport(
        allow=net.allow, resolver=net.resolver, verify=net.verify, pool_factory=net.pool_factory
    )
    transport = PinnedTransport(inner, tool.origin)
    timeout = httpx.Timeout(limits.read_s, connect=limits.connect_s)
    with httpx.Client(
        transport=transport, follow_redirects=False, trust_env=False, timeout=timeout
    ) as client:
        built = client.build_request(
            request.method, url, params=query or None, headers=headers, json=body
        )
        try:
            response, data, truncated, _ = send(client, built, limits=limits, deadline=deadline)
        except ToolFailed as exc:
            if tool.is_write and _maybe_sent(exc):
                raise OutcomeUnknown(
                    f"{tool.connector}/{tool.operation} was sent and its answer never came"
                    f" ({exc.message}): the provider may have applied it"
                ) from exc
            raise
    text = data.decode("utf-8", errors="replace")
    if net.taint is not None:
        text = net.taint.scrub(text)
    if not 200 <= response.status_code < 300:
        raise ToolFailed(
            f"{tool.connector}/{tool.operation} answered HTTP {response.status_code}",
            code="operation_failed",
            details={"status": response.status_code},
        )
    try:
        parsed: Any = json.loads(text) if text.strip() and not truncated else None
    except ValueError:
        parsed = {"text": text}
    return {"status": response.status_code, "result": _mapped(tool.spec, parsed)}


def mcp_arguments(tool: OperationTool, args: Mapping[str, Any]) -> dict[str, Any]:
    """The exact arguments an MCP operation sends its upstream tool: the template's, resolved
    against the call's inputs (``idempotency_key`` is proctor's and never sent)."""
    assert tool.spec is not None and tool.spec.mcp is not None
    return _fill(dict(tool.spec.mcp.arguments), _inputs(args))


def mcp_admit(tool: OperationTool, args: Mapping[str, Any]) -> None:
    """Admission's check of an MCP operation's call (see :meth:`McpCaller.admit`): the exact
    arguments it would send, against what the upstream tool was pinned with.

    Raises:
        RefusedCall: ``mcp_upstream_unavailable``, or the caller's refusal.
    """
    if tool.spec is None or tool.spec.mcp is None or tool.server is None:
        return
    if tool.upstream is None:
        from proctor.errors import RefusedCall

        raise RefusedCall(
            f"{tool.connector}/{tool.operation} calls upstream MCP server {tool.server!r},"
            " and this run has no upstream servers; nothing was sent",
            code="mcp_upstream_unavailable",
        )
    arguments = mcp_arguments(tool, args)
    tool.upstream.admit(tool.server, tool.spec.mcp.tool, arguments, tool.spec.verb)


# The failures of an upstream call after it may have been sent: the server took the call and
# no answer came (a timeout, a connection or process that ended mid-call).
_MCP_MAYBE_SENT = frozenset({"mcp_upstream_timeout", "mcp_upstream_failed"})


def _call_mcp(tool: OperationTool, args: dict[str, Any]) -> dict[str, Any]:
    assert tool.spec is not None and tool.spec.mcp is not None and tool.server is not None
    if tool.upstream is None:
        raise ToolFailed(
            f"{tool.connector}/{tool.operation} calls upstream MCP server {tool.server!r},"
            " and this run has no upstream servers",
            code="mcp_upstream_unavailable",
        )
    arguments = mcp_arguments(tool, args)
    try:
        answer = tool.upstream.call(tool.server, tool.spec.mcp.tool, arguments, tool.spec.verb)
    except ToolFailed as exc:
        if tool.is_write and exc.code in _MCP_MAYBE_SENT:
            raise OutcomeUnknown(
                f"{tool.connector}/{tool.operation} was sent to {tool.server!r} and its answer"
                f" never came ({exc.message}): the server may have applied it"
            ) from exc
        raise
    return {"result": _mapped(tool.spec, answer)}


def _maybe_sent(exc: ToolFailed) -> bool:
    """Whether a failed send may have reached the provider: a timeout or a broken connection
    after the connection was made (a connect that failed sent nothing)."""
    import httpx

    if exc.code not in ("http_timeout", "http_transport_error"):
        return False
    unsent = (httpx.ConnectTimeout, httpx.ConnectError, httpx.PoolTimeout)
    return not isinstance(exc.__cause__, unsent)


def _mapped(op: Operation, parsed: Any) -> Any:
    if op.result is None:
        return parsed
    out = {}
    for key, pointer in op.result.items():
        value = pointer_get(parsed, pointer)
        out[key] = None if value is _MISSING else value
    return out


def operation_deliver(
    credentials: Mapping[str, ResolvedCredential],
    *,
    allow: EgressAllow,
    taint: TaintSet | None,
    resolver: Resolver | None = None,
    verify: ssl.SSLContext | bool = True,
    limits: EgressLimits | None = None,
    pool_factory: Callable[[ssl.SSLContext | bool], httpx.BaseTransport] | None = None,
) -> Callable[[Any, Tool], dict[str, Any]]:
    """The admission ``deliver`` seam for operations: each gets only its connector's
    credential, in a :class:`NetworkContext` under the run's egress allow-list."""

    def deliver(spec: Any, tool: Tool) -> dict[str, Any]:
        if not isinstance(tool, OperationTool) or tool.server is not None:
            # an MCP operation's credential is its server's, delivered where it is reached
            return {}
        name = tool.credential
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

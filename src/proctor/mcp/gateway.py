"""``proctor mcp --gateway``: the workspace's upstream MCP servers, governed, for any MCP client.

Each pinned upstream tool is served as ``<server>__<tool>`` with its pinned description
(labelled as untrusted upstream text), input and output schemas and annotations. When the
gateway starts, every configured server is started once and each tool it lists that is not
pinned yet is pinned (first use); a tool whose definition changed since its pin stays served
as pinned, and its calls are refused ``tool_definition_changed`` until a person approves the
change (``proctor mcp diff`` / ``approve``).

A client session is one run: the gateway's package (written to ``.proctor/gateway/``, one
agent method whose allowance is exactly the served tools) is run when the session's first
call comes, and each call is a call of that run's turn, admitted like any other (scope,
schema, policy, the approval floor with the exact arguments, budgets, rate limits), audited
and recorded. A write under ``effects: ask`` waits for a person: the client is asked through
elicitation as for served skills (:class:`~proctor.mcp.approvals.ApprovalRelay`), and the call
waits, with progress, until a person decides (``proctor approve``, the console), then runs
once or answers ``approval_declined``. When the server stops, each session's run ends its
turn and seals with a receipt (``proctor history`` lists it as ``mcp-gateway#session``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mcp_types as types

from proctor.errors import ProctorError, UsageError
from proctor.mcp.session_runs import SessionHost, SessionRuns, error, session_package

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext

    from proctor.runtime.gateway.upstreams import Upstreams, UpstreamTool

__all__ = ["GatewayTools", "gateway_name", "open_gateway"]

GatewayHost = SessionHost
"""What the gateway uses of the server dispatching to it."""

SEPARATOR = "__"


def gateway_name(server: str, tool: str) -> str:
    """``<server>__<tool>`` (a server name never holds ``__``)."""
    return f"{server}{SEPARATOR}{tool}"


def _package(root: Path, tools: list[str]) -> Path:
    """Write the gateway's package for ``tools`` (one folder per distinct tool set)."""
    return session_package(
        root,
        "gateway",
        "mcp-gateway",
        tools,
        (
            "An MCP client's session through proctor's gateway to upstream MCP servers.",
            "One MCP client session; each call one governed upstream call.",
            "An MCP client calls upstream tools through the gateway.",
        ),
    )


def open_gateway(
    workspace: Any, environ: Mapping[str, str], config: Path | None, report: Any
) -> GatewayTools:
    """Read the upstreams, pin what is new, and build the gateway's tools.

    Raises:
        UsageError: ``mcp_no_upstreams``.
        ParseError, ConfigError: the configuration or the lock is refused.
    """
    from proctor.runtime.gateway.upstreams import CONFIG_ENV, shared_upstreams

    env = dict(environ)
    if config is not None:
        env[CONFIG_ENV] = str(config.resolve())
    upstreams = shared_upstreams(workspace, env)
    if upstreams is None:
        raise UsageError(
            "--gateway serves the workspace's upstream MCP servers and it has no .mcp.json"
            " (or name one with --config)",
            code="mcp_no_upstreams",
        )
    for server in upstreams.config.servers:
        try:
            upstreams.pin_new(server)
        except ProctorError as exc:
            report(
                f"proctor mcp: upstream {server!r} could not be listed [{exc.code}]:"
                f" {exc.message}; its pinned tools are served as pinned"
            )
    return GatewayTools(upstreams, _package(workspace.root, sorted(upstreams.tools())))


class GatewayTools:
    """The served upstream tools and the run of each client session."""

    def __init__(self, upstreams: Upstreams, package: Path) -> None:
        self.upstreams = upstreams
        self.package = package
        self.tools: dict[str, UpstreamTool] = {
            gateway_name(t.server, t.upstream_name): t for t in upstreams.tools().values()
        }
        self.sessions = SessionRuns(package)

    def serves(self, name: str) -> bool:
        """Whether ``name`` is a served upstream tool."""
        return name in self.tools

    def tool_list(self) -> list[types.Tool]:
        """The pinned declarations, as ``<server>__<tool>``."""
        out = []
        for name, tool in sorted(self.tools.items()):
            definition = tool.definition
            annotations = definition.get("annotations")
            out.append(
                types.Tool(
                    name=name,
                    title=definition.get("title"),
                    description=tool.description,
                    input_schema=tool.schema,
                    output_schema=definition.get("outputSchema"),
                    annotations=None
                    if not isinstance(annotations, dict)
                    else types.ToolAnnotations.model_validate(annotations),
                )
            )
        return out

    async def call(
        self,
        ctx: ServerRequestContext[Any, Any],
        name: str,
        arguments: dict[str, Any],
        host: SessionHost,
        client: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult | dict[str, Any]:
        """One client call: admitted as a call of the session run's turn; a change waits for a
        person's decision (``client``: the client's name and version, for the audit log)."""
        tool = self.tools[name]
        outcome = await self.sessions.call(ctx, host, tool.name, arguments, client)
        if isinstance(outcome, types.CallToolResult):
            return outcome
        if outcome.status != "completed":
            failure = outcome.error or {}
            return error(str(failure.get("code") or outcome.status), str(failure.get("message")))
        result = outcome.result if isinstance(outcome.result, dict) else {}
        content = result.get("content") if isinstance(result.get("content"), list) else []
        structured = result.get("structured_content")
        # the wire form, not a model: the SDK checks it against the protocol's schema either
        # way, and a model would be validated here, dumped, then checked again
        return {
            "content": content,
            **({"structuredContent": structured} if isinstance(structured, dict) else {}),
            "isError": False,
            "resultType": "complete",
        }

    def seal_all(self, host: SessionHost) -> None:
        """End each session's run, sealed with a receipt (:meth:`SessionRuns.seal_all`)."""
        self.sessions.seal_all(host)

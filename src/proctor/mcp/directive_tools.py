"""Directive tools: ``proctor mcp --directives`` serves the reference kernel's three MCP tools.

The reference kernel's MCP server offers ``list_directives``, ``run_directive`` and
``list_tools``; these are the same tools with the same arguments:

- ``list_directives {category?}``: the exposed directives (id, description, tools, category,
  source), optionally of one category, and the directive files the loader refused, by name.
- ``run_directive {directive_id, request, max_steps = 20}``: runs one directive as a governed
  run (admitted, recorded, receipted) and answers its ``proctor.run.v1`` envelope. With
  ``--drive`` the configured model works the directive's turn (``max_steps`` model requests,
  clamped to 1..50 as the reference clamps it); without, the run pauses ``needs_agent`` and
  the client works the turn with the turn tools (``turn_status``, ``turn_call`` with the
  directive's own tool names, ``turn_complete``).
- ``list_tools {include_args = true}``: the registered tools with their effect class,
  description and argument summary, and the reference name of each tool that has one.

Which directives are exposed is the server's, not the client's: every loadable directive, or
those named with ``--directive ID``. A ``run_directive`` naming another id is refused
``directive_not_exposed`` (audited) before anything runs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types

from proctor.contracts.values import dataclass
from proctor.errors import ProctorError, UsageError
from proctor.mcp.shared import ServerConfig, TurnHost, compact_nullables, error_result, tool_result
from proctor.mcp.turn_declarations import check_arguments

if TYPE_CHECKING:
    from proctor.runtime.agents.sessions import DirectiveSession

__all__ = ["MAX_STEPS_LIMIT", "TOOLS", "DirectiveExposure", "DirectiveTools"]

MAX_STEPS_LIMIT = 50
"""The most model requests a served directive turn may make (the reference's clamp)."""
_DEFAULT_STEPS = 20
Args = dict[str, Any]
_READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}

TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "list_directives": (
        "List the directives this server runs: id, description, tools, category. Optionally"
        " only one category (system, task, security, debug).",
        {
            "type": "object",
            "properties": {"category": {"type": ["string", "null"], "maxLength": 40}},
            "additionalProperties": False,
        },
    ),
    "run_directive": (
        "Run one directive on a request as a governed run; answers the run's envelope. A run"
        " that pauses for its agent turn is worked with turn_status, turn_call (the"
        " directive's own tool names, such as read_file) and turn_complete.",
        {
            "type": "object",
            "properties": {
                "directive_id": {"type": "string", "minLength": 1, "maxLength": 200},
                "request": {"type": "string", "maxLength": 100_000},
                "max_steps": {"type": "integer", "default": _DEFAULT_STEPS},
            },
            "required": ["directive_id", "request"],
            "additionalProperties": False,
        },
    ),
    "list_tools": (
        "List the registered tools with description and, optionally, an argument summary.",
        {
            "type": "object",
            "properties": {"include_args": {"type": "boolean", "default": True}},
            "additionalProperties": False,
        },
    ),
}


@dataclass(frozen=True)
class DirectiveExposure:
    """What ``--directives`` serves.

    Attributes:
        allowed: the directive ids exposed (``None``: every loadable directive).
        drive: the configured model works each directive's turn (``--drive``); otherwise the
            run pauses for the client to work it.
    """

    allowed: tuple[str, ...] | None = None
    drive: bool = False


class DirectiveTools:
    """The three directive tools over :class:`~proctor.runtime.agents.sessions.DirectiveSession`.

    ``session`` opens a directive session for one call with the given agent driver (``None``:
    the turn pauses for the client); the caller closes it.
    """

    def __init__(
        self,
        config: ServerConfig,
        exposure: DirectiveExposure,
        session: Callable[[Any], DirectiveSession],
    ) -> None:
        self.config = config
        self.exposure = exposure
        self._session = session
        self._envelope_schema: dict[str, Any] | None = None

    def tool_list(self) -> list[types.Tool]:
        """The three tools' declarations."""
        if self._envelope_schema is None:
            from proctor.contracts.envelope import run_envelope_schema

            self._envelope_schema = compact_nullables(run_envelope_schema())
        out = []
        for name, (description, schema) in TOOLS.items():
            run = name == "run_directive"
            out.append(
                types.Tool(
                    name=name,
                    description=description,
                    input_schema=schema,
                    output_schema=self._envelope_schema if run else None,
                    annotations=types.ToolAnnotations.model_validate(
                        {"readOnlyHint": False, "openWorldHint": True} if run else _READ_ONLY
                    ),
                )
            )
        return out

    def serves(self, name: str) -> bool:
        """Whether ``name`` is a directive tool."""
        return name in TOOLS

    def check_exposure(self) -> None:
        """Refuse, at start-up, an exposed id that names no loadable directive, and ``--drive``
        without a complete model configuration.

        Raises:
            UsageError: ``directive_not_found``; ParseError: the directive's file is refused.
            ConfigError: the managed-agent configuration is incomplete (``agent_*_missing``).
        """
        if self.exposure.drive:
            from proctor.runtime.home.config import agent_config

            agent_config(_home(self.config))
        if self.exposure.allowed:
            session = self._session(None)
            try:
                found = session.directives()
            finally:
                session.close()
            for directive_id in self.exposure.allowed:
                found.get(directive_id)

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        host: TurnHost,
        report: Callable[[int], Awaitable[None]] | None = None,
    ) -> types.CallToolResult | dict[str, Any]:
        """Answer one directive tool call; a refusal is a tool error the client can read.

        Arguments that do not fit the tool's input schema are refused ``arguments_invalid``.
        """
        try:
            check_arguments(name, arguments, TOOLS)
        except UsageError as exc:
            refused = exc
            host.audit("mcp_directive_refused", tool=name, code=refused.code)
            return error_result(refused)
        if name == "run_directive":
            return await self._run(arguments, host, report)
        handler = self._list_directives if name == "list_directives" else self._list_tools

        def work(_stop: threading.Event) -> dict[str, Any] | ProctorError:
            session = self._session(None)
            try:
                return handler(session, arguments)
            except ProctorError as exc:
                return exc
            finally:
                session.close()

        outcome = await host.run_in_worker(work)
        if isinstance(outcome, ProctorError):
            return error_result(outcome)
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(outcome, ensure_ascii=False))],
            structured_content=outcome,
        )

    def _exposed(self, directive_id: str) -> bool:
        allowed = self.exposure.allowed
        return allowed is None or directive_id in allowed

    def _list_directives(self, session: DirectiveSession, arguments: dict[str, Any]) -> Args:
        found = session.directives()
        category = arguments.get("category")
        items = [
            d.to_dict()
            for d in found.listed()
            if self._exposed(d.id) and (category is None or d.category == category)
        ]
        refused = [
            {"file": label, "code": error.code}
            for label, error in sorted(found.refused.items())
            if self.exposure.allowed is None
        ]
        return {"directives": items, "count": len(items), "refused": refused}

    def _list_tools(self, session: DirectiveSession, arguments: dict[str, Any]) -> Args:
        from proctor.runtime.directives import DIRECTIVE_TOOLS
        from proctor.runtime.tools.agent_tools import tool_catalogue

        listed = tool_catalogue(session.tools, include_args=arguments.get("include_args", True))
        reference = {tool: ref for ref, tool in DIRECTIVE_TOOLS.items()}
        for entry in listed["tools"]:
            if entry["name"] in reference:
                entry["reference_name"] = reference[entry["name"]]
        return listed

    async def _run(
        self,
        arguments: dict[str, Any],
        host: TurnHost,
        report: Callable[[int], Awaitable[None]] | None,
    ) -> types.CallToolResult | dict[str, Any]:
        directive_id = str(arguments["directive_id"])
        if not self._exposed(directive_id):
            refused = UsageError(
                f"directive {directive_id[:80]!r} is not exposed by this server",
                code="directive_not_exposed",
            )
            host.audit(
                "mcp_directive_refused",
                tool="run_directive",
                code=refused.code,
                directive_id=directive_id[:200],
            )
            return error_result(refused)
        asked = int(arguments.get("max_steps", _DEFAULT_STEPS))
        max_steps = max(1, min(asked, MAX_STEPS_LIMIT))
        request = str(arguments["request"])

        def work(stop: threading.Event) -> dict[str, Any] | ProctorError:
            agent = None
            try:
                if self.exposure.drive:
                    from proctor.runtime.agents.loop import ManagedAgent

                    agent = ManagedAgent.from_home(
                        _home(self.config), view="reference", max_steps=max_steps
                    )
                session = self._session(agent)
                try:
                    envelope = session.run_directive(
                        directive_id, request, authority=self.config.authority, stop=stop
                    )
                finally:
                    session.close()
            except ProctorError as exc:
                return exc
            finally:
                if agent is not None:
                    agent.close()
            return envelope.to_json()

        doc = await host.run_in_worker(work, report=report)
        if isinstance(doc, ProctorError):
            host.audit(
                "mcp_directive_refused",
                tool="run_directive",
                code=doc.code,
                directive_id=directive_id[:200],
            )
            return error_result(doc)
        host.audit(
            "mcp_directive_run",
            run_id=doc.get("run_id"),
            directive_id=directive_id,
            max_steps=max_steps,
            max_steps_asked=asked,
            driven=self.exposure.drive,
        )
        run_id = doc.get("run_id")
        if isinstance(run_id, str) and doc.get("status") != "sealed":
            self.config.runs[run_id] = None  # the turn tools work it from here
        return tool_result(doc, self.config.console_url)


def _home(config: ServerConfig) -> Any:
    from pathlib import Path

    raw = config.environ.get("PROCTOR_HOME")
    return Path(raw) if raw else None

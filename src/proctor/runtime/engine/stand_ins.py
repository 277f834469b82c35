"""Process tools answered by a stand-in instead of a process: how ``proctor test`` serves a
test's ``providers.processes`` without starting anything.

A session given a :data:`ProcessRoute` hands its runs' governors a tool table whose
``process``-effect tools keep their names, schemas, path checks and effect class, so admission
is the real one (scope, schema, containment, policy, the floor with the exact argv, the claim,
credential delivery), and only the handler is replaced: the route answers the call, and the
tool's own result checks run on the answer (its declared output schema; ``command.execute``'s
non-zero exit fails the call unless ``check: false``). Nothing else of a run changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from proctor.contracts.values import replace
from proctor.errors import ToolFailed

if TYPE_CHECKING:
    from proctor.runtime.tools.base import Tool, ToolContext

__all__ = ["ProcessRoute", "stand_in_processes"]

ProcessRoute = Callable[[str, Mapping[str, Any]], dict[str, Any]]
"""Answers one admitted call of a process tool: ``(tool name, arguments) -> result``; raises
a ``ProctorError`` (a ``RefusedCall`` for a call it has no answer for) to refuse it."""


def _stood_in(tool: Tool, route: ProcessRoute) -> Tool:
    def handler(_ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        result = route(tool.name, args)
        _check_result(tool, args, result)
        return result

    return replace(tool, handler=handler)


def _check_result(tool: Tool, args: Mapping[str, Any], result: dict[str, Any]) -> None:
    """The checks the tool makes of what its process gave, made of the stand-in's answer.

    Raises:
        ToolFailed: ``process_fixture_invalid`` (the answer does not fit the tool's output
            schema), ``command_failed`` (a non-zero exit under ``check``).
    """
    if tool.output_schema is not None:
        import fastjsonschema

        try:
            fastjsonschema.compile(tool.output_schema)(result)
        except Exception as exc:  # fastjsonschema.JsonSchemaValueException
            where = str(getattr(exc, "name", "data")).replace("data", "$", 1)
            raise ToolFailed(
                f"the stand-in result of {tool.name} does not fit the tool's output schema at "
                f"{where}",
                code="process_fixture_invalid",
            ) from None
    if tool.name == "command.execute" and args.get("check", True):
        code = result.get("exit_code")
        if code != 0:
            facts = {k: v for k, v in result.items() if k not in ("stdout", "stderr")}
            raise ToolFailed(
                f"the command exited with status {code}", code="command_failed", details=facts
            )


class _StoodIn(Mapping[str, "Tool"]):
    """A tool table whose process tools are answered by a route; other tools as they are
    (nothing is loaded before it is looked up)."""

    def __init__(self, tools: Mapping[str, Tool], route: ProcessRoute) -> None:
        self._tools = tools
        self._route = route
        self._wrapped: dict[str, Tool] = {}

    def __getitem__(self, name: str) -> Tool:
        if name in self._wrapped:
            return self._wrapped[name]
        tool = self._tools[name]
        if tool.effect == "process":
            tool = self._wrapped[name] = _stood_in(tool, self._route)
        return tool

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools


def stand_in_processes(tools: Mapping[str, Tool], route: ProcessRoute) -> Mapping[str, Tool]:
    """``tools`` with every ``process``-effect tool answered by ``route`` instead of a process.

    The tools keep everything admission reads (name, schema, paths, effect); the route's
    answer passes the tool's result checks (:func:`_check_result`), then the run's
    sanitization and records as any result.
    """
    return _StoodIn(tools, route)

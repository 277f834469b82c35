"""The reference kernel's guard names, so a guard module written for it loads unchanged.

A workspace guard module (``[policy] guards`` in ``proctor.toml``) written for the reference
kernel begins::

    from auro_runtime.guards import GuardContext, GuardVerdict, register_guard

While proctor executes such a module, and whenever its functions import later, the names
``auro_runtime`` and ``auro_runtime.guards`` resolve to :data:`MODULES` (for that module
only: nothing is put in ``sys.modules``, so a real ``auro_runtime`` installed beside proctor is
neither shadowed nor used). ``GuardContext``, ``GuardVerdict`` and ``GuardFn`` are
:mod:`proctor.policy`'s own. ``register_guard`` registers into proctor's registry a wrapper
that shows the guard each call as the reference kernel shows it:

- ``tool_name`` is the reference name (``read_file`` for ``fs.read``; ``write_file`` for
  ``fs.write``, ``fs.edit`` and ``fs.apply_bundle``; see :mod:`proctor.policy.names`); a tool
  with no reference name keeps proctor's;
- ``args`` and ``raw_args`` use the reference's argument names (``http.request``'s
  ``auth: {credential}`` is ``auth_alias``, ``timeout_s`` is ``timeout``; ``echo``'s ``text`` is
  ``message``; ``fs.restore``'s ``trash_id`` is ``archive_name``);
- ``run_history`` entries carry the same names.

So a guard that refuses ``read_file`` of a path under auro refuses ``fs.read`` of it here.
What the guard returns is used as proctor's own guards' verdicts are.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

from proctor.policy.guards import GuardContext, GuardFn, GuardVerdict
from proctor.policy.names import REFERENCE_TOOL_NAMES
from proctor.policy.registry import register_guard as _register

__all__ = ["MODULES", "aliased_import", "reference_context", "register_guard"]

_REFERENCE_NAME: dict[str, str] = {
    tool: ref for ref, tools in REFERENCE_TOOL_NAMES.items() for tool in tools
}
_RENAMED: dict[str, dict[str, str]] = {
    "http.request": {"timeout_s": "timeout"},
    "echo": {"text": "message"},
    "fs.restore": {"trash_id": "archive_name"},
}


def _reference_args(tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
    renamed = _RENAMED.get(tool, {})
    out = {renamed.get(k, k): v for k, v in args.items()}
    if tool == "http.request" and isinstance(out.get("auth"), Mapping):
        auth = out.pop("auth")
        if "credential" in auth:
            out["auth_alias"] = auth["credential"]
        if "scheme" in auth:
            out["auth_scheme"] = auth["scheme"]
    return out


def reference_context(ctx: GuardContext) -> GuardContext:
    """``ctx`` as the reference kernel shows a call: its tool, argument and history names."""
    history = []
    for step in ctx.run_history:
        tool = str(step.get("tool", ""))
        args = step.get("args")
        history.append(
            {
                **step,
                "tool": _REFERENCE_NAME.get(tool, tool),
                "args": _reference_args(tool, args) if isinstance(args, Mapping) else args,
            }
        )
    tool = ctx.tool_name
    return GuardContext(
        tool_name=_REFERENCE_NAME.get(tool, tool),
        raw_args=_reference_args(tool, ctx.raw_args),
        args=_reference_args(tool, ctx.args),
        reason=ctx.reason,
        directive_id=ctx.directive_id,
        run_history=tuple(history),
        workspace_relpaths=ctx.workspace_relpaths,
        write_budget=ctx.write_budget,
    )


def register_guard(name: str) -> Callable[[GuardFn], GuardFn]:
    """The reference's ``@register_guard(name)``: registers the guard with proctor, shown each
    call as the reference kernel shows it (:func:`reference_context`).

    Raises:
        PolicyLoadError: the name is taken (a shipped guard's, or another module's).
    """

    def decorator(fn: GuardFn) -> GuardFn:
        def guard(ctx: GuardContext) -> GuardVerdict | None:
            return fn(reference_context(ctx))

        guard.__name__ = getattr(fn, "__name__", name)
        guard.__doc__ = fn.__doc__
        _register(name)(guard)
        return fn

    return decorator


def _module(name: str, **members: Any) -> types.ModuleType:
    module = types.ModuleType(name, "proctor's stand-in for the reference kernel's " + name)
    for key, value in members.items():
        setattr(module, key, value)
    return module


_GUARDS = _module(
    "auro_runtime.guards",
    GuardContext=GuardContext,
    GuardVerdict=GuardVerdict,
    GuardFn=GuardFn,
    register_guard=register_guard,
)
_PACKAGE = _module("auro_runtime", guards=_GUARDS)
_PACKAGE.__path__ = []  # a package, so "auro_runtime.guards" reads as its submodule

MODULES: dict[str, types.ModuleType] = {"auro_runtime": _PACKAGE, "auro_runtime.guards": _GUARDS}
"""The module names a guard module written for the reference kernel may import."""


def aliased_import(real: Callable[..., Any]) -> Callable[..., Any]:
    """``__import__`` that answers :data:`MODULES` itself and hands every other name to
    ``real``. Any other ``auro_runtime`` module (its executor, its sanitizer) is not
    provided: importing one fails as it would without the reference installed."""

    def importer(
        name: str,
        globals: Mapping[str, Any] | None = None,
        locals: Mapping[str, Any] | None = None,
        fromlist: tuple[str, ...] | list[str] | None = (),
        level: int = 0,
    ) -> Any:
        if level == 0 and name in MODULES:
            return MODULES[name] if fromlist else _PACKAGE
        return real(name, globals, locals, fromlist, level)

    return importer

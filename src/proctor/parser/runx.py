"""The runx reference's package fields that proctor reads with a meaning of its own (pure).

The seam: :mod:`proctor.parser.skill` validates ``run.yaml`` into a profile; a package written
for the runx reference (``minimum_runx``) may also use fields whose runx meaning is mapped here
onto proctor's:

- ``runners: {NAME: {type: graph, default?, credential?}}`` (the credentials document's runner
  profiles): a ``graph`` runner is the method of the same name, run by the step engine;
  ``default: true`` makes it the default method; ``credential`` is the declared credential its
  steps that reach a provider (a process tool, ``command.execute``, ``http.request``) are given
  when they name none. Another runner ``type`` is refused (``runner_type_unsupported``): proctor
  runs methods, not runx's other runner kinds or hosted runners;
- an input a method's steps read (``$input.NAME``) that its ``inputs`` do not declare: the
  reference lets such a package run, each value given as the caller wrote it (a ``-i`` value as
  text), so the name becomes a required input of any JSON type. proctor's own packages
  (``minimum_proctor``) still declare every input (``reference_unknown_input``);
- ``tool: {module: ...}`` (a JavaScript module tool) is refused
  (``process_tool_module_unsupported``): proctor runs Python workers (``worker:``), and a
  program through ``tool: {command: ...}``.

Each refusal is a :class:`RunxRefusal` naming the document path; the caller turns it into a
``ParseError`` at that path's position.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from proctor.contracts.skill import Method, ProcessStep, RunProfile, ToolStep
from proctor.errors import ProctorError
from proctor.parser.refs import collect_refs

__all__ = [
    "PROVIDER_TOOLS",
    "RunxRefusal",
    "apply_runners",
    "declare_read_inputs",
    "refuse_module_tools",
]

Path = tuple[str | int, ...]

PROVIDER_TOOLS = ("http.request", "command.execute")
"""The native tools whose step a runner's ``credential`` is given to (they reach a provider)."""


class RunxRefusal(Exception):
    """A runx field proctor refuses: ``path`` into the document, a message and a code."""

    def __init__(self, path: Path, message: str, code: str) -> None:
        super().__init__(message)
        self.path, self.message, self.code = path, message, code


def refuse_module_tools(data: dict[str, Any]) -> None:
    """Refuse ``tool: {module: ...}`` before the strict model reads it as an unknown field.

    Raises:
        RunxRefusal: ``process_tool_module_unsupported`` at the step's ``tool.module``.
    """
    methods = data.get("methods")
    if not isinstance(methods, dict):
        return
    for name, method in methods.items():
        steps = method.get("steps") if isinstance(method, dict) else None
        for index, step in enumerate(steps if isinstance(steps, list) else []):
            tool = step.get("tool") if isinstance(step, dict) else None
            if isinstance(tool, dict) and "module" in tool:
                raise RunxRefusal(
                    ("methods", name, "steps", index, "tool", "module"),
                    "tool: {module: ...} is a JavaScript module tool, which proctor does not"
                    " run; use a worker step (worker: {module: FILE.py, function: NAME}) or a"
                    " process tool (tool: {command: PROGRAM, args: [...]})",
                    "process_tool_module_unsupported",
                )


def apply_runners(profile: RunProfile) -> RunProfile:
    """The profile with its ``runners`` mapped onto methods (see the module).

    Raises:
        RunxRefusal: ``runner_type_unsupported`` (a type other than ``graph``),
            ``runner_method_missing`` (no method of the runner's name),
            ``runner_default_conflict`` (two defaults, or one that differs from
            ``default_method``), ``credential_unknown`` (a credential not declared).
    """
    if not profile.runners:
        return profile
    methods = dict(profile.methods)
    default = profile.default_method
    for name, runner in profile.runners.items():
        at: Path = ("runners", name)
        if runner.type != "graph":
            raise RunxRefusal(
                (*at, "type"),
                f"runner {name!r} has type {runner.type!r}; proctor runs a runner of type graph"
                " (the method of the same name) and refuses other runner types and hosted"
                " runners",
                "runner_type_unsupported",
            )
        method = methods.get(name)
        if method is None:
            raise RunxRefusal(
                at,
                f"runner {name!r} names no method: a graph runner runs the method of its name"
                " (methods.{name}.steps)",
                "runner_method_missing",
            )
        if runner.default:
            if default is not None and default != name:
                raise RunxRefusal(
                    (*at, "default"),
                    f"runner {name!r} is default, and so is {default!r}: one method is the default",
                    "runner_default_conflict",
                )
            default = name
        if runner.credential is not None:
            if runner.credential not in profile.credentials:
                raise RunxRefusal(
                    (*at, "credential"),
                    f"credential {runner.credential!r} is not declared under credentials",
                    "credential_unknown",
                )
            methods[name] = _with_credential(method, runner.credential)
    return profile.model_copy(update={"methods": methods, "default_method": default})


def _with_credential(method: Method, credential: str) -> Method:
    steps: list[Any] = []
    for step in method.steps:
        # a connector operation sends its connector's own credential, never another
        takes = isinstance(step, ProcessStep) or (
            isinstance(step, ToolStep) and step.tool in PROVIDER_TOOLS
        )
        if takes and getattr(step, "credential", None) is None:
            step = step.model_copy(update={"credential": credential})
        steps.append(step)
    return method.model_copy(update={"steps": steps})


def declare_read_inputs(
    profile: RunProfile, reference_fields: Callable[[Any], Iterable[tuple[Path, Any]]]
) -> RunProfile:
    """The profile with every input its steps read and do not declare added to their method's
    ``inputs`` as a required input of any type (a runx package's; see the module). A method
    whose ``inputs`` name no ``properties`` (any object) is left as it is.

    ``reference_fields(step)`` gives the step's fields that may hold references. A malformed
    reference is left for the caller's own check to refuse.
    """
    methods: dict[str, Method] = {}
    changed = False
    for name, method in profile.methods.items():
        properties = method.inputs.get("properties")
        if not isinstance(properties, dict):
            methods[name] = method
            continue
        read: list[str] = []
        for step in method.steps:
            for _field, value in reference_fields(step):
                try:
                    refs = collect_refs(value)
                except ProctorError:
                    continue
                read += [r.name for r in refs if r.root == "input" and r.name not in properties]
        if not read:
            methods[name] = method
            continue
        added = dict.fromkeys(read)
        schema = dict(method.inputs)
        schema["properties"] = {**properties, **{n: {} for n in added}}
        required = schema.get("required")
        kept = list(required) if isinstance(required, list) else []
        schema["required"] = kept + [n for n in added if n not in kept]
        methods[name] = method.model_copy(update={"inputs": schema})
        changed = True
    return profile.model_copy(update={"methods": methods}) if changed else profile

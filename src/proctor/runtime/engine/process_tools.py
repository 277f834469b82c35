"""Process-tool steps (``tool: {command, args?, cwd?, ...}``): one governed ``command.execute``.

The runx reference's inline process tool is a program its package runs with an exact argv. Here
the step becomes a tool step of ``command.execute`` (:mod:`proctor.runtime.tools.command`): argv
is ``[command, *args]`` (each ``args`` entry a string or a reference, resolved like any step
input), the folder it runs in is the package's own (or ``cwd`` inside it), and its timeout and
output bound are the tool's. So it takes the same path as any command: admission, the floor
(``effects: ask`` shows its argv; ``none`` refuses it), the sandbox, the package's declared
``environment``, and the step's ``credential:`` alone. Its crash reconciliation and receipts are
a tool step's.

The step's output is the command's result; when its standard output is one JSON value that
value is added as ``json`` (the shape a runx process tool answers in).

Refusals (the step fails, nothing runs): ``process_tool_outside_workspace`` when the package or
its ``cwd`` is not a folder inside the workspace (a command runs in a workspace folder).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from proctor.contracts.skill import ProcessStep, ToolStep
from proctor.errors import ParseError, ProctorError, RefusedCall
from proctor.runtime.admission.governor import Governor
from proctor.runtime.engine.host import StepDone, StepPause, StepRunner, step_failed
from proctor.runtime.engine.kinds import tool_step

__all__ = ["process_step"]

TOOL = "command.execute"


def _literal(value: str) -> str:
    """A fixed string as step inputs hold it (a leading ``$`` is escaped, never a reference)."""
    return "$" + value if value.startswith("$") else value


def _folder(run: StepRunner, step: ProcessStep) -> str:
    """The workspace path of the folder the program runs in.

    Raises:
        RefusedCall: ``process_tool_outside_workspace``.
    """
    package = run.skill.folder.resolve()
    target = (package / step.tool.cwd).resolve() if step.tool.cwd else package
    root = run.s.workspace.root.resolve()
    if (target != package and package not in target.parents) or (
        target != root and root not in target.parents
    ):
        raise RefusedCall(
            f"step '{step.id}': a process tool runs in a folder of its package inside the"
            " workspace; this package's is not one",
            code="process_tool_outside_workspace",
            details={"step": step.id},
        )
    return target.relative_to(root).as_posix() or "."


def process_step(
    run: StepRunner,
    governor: Governor,
    index: int,
    step: ProcessStep,
    inputs: dict[str, Any],
    outputs: dict[str, Any],
) -> StepDone | StepPause:
    """Run the step's program once, as a governed ``command.execute`` call."""
    try:
        cwd = _folder(run, step)
    except ProctorError as exc:
        return step_failed(step.id, exc, TOOL)
    spec = step.tool
    args: dict[str, Any] = {"argv": [_literal(spec.command), *spec.args], "cwd": _literal(cwd)}
    if spec.timeout_seconds is not None:
        args["timeout_seconds"] = spec.timeout_seconds
    if spec.max_output_bytes is not None:
        args["max_output_bytes"] = spec.max_output_bytes
    as_tool = ToolStep(
        id=step.id,
        tool=TOOL,
        inputs=args,
        credential=step.credential,
        reason=step.reason or f"process tool {PurePosixPath(spec.command).name} of the package",
        approvals=step.approvals,
        expires_in=step.expires_in,
    )
    done = tool_step(run, governor, index, as_tool, inputs, outputs)
    if isinstance(done, StepDone) and done.outcome == "completed":
        done.output = with_json(done.output)
    return done


def with_json(result: Any) -> Any:
    """The command's result, with ``json`` beside it when its standard output is one JSON
    value (read strictly: a duplicate key or NaN is not JSON here)."""
    if not isinstance(result, dict) or result.get("stdout_truncated"):
        return result
    stdout = result.get("stdout")
    if not isinstance(stdout, str) or not stdout.strip():
        return result
    from proctor.contracts import json_strict

    try:
        value = json_strict.loads(stdout, source="the process tool's output")
    except ParseError:
        return result
    return {**result, "json": value}

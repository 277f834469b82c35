"""Worker steps (``worker: {module, function}``): one governed call of ``worker.run``.

The step becomes a tool step of ``worker.run`` (:mod:`proctor.runtime.tools.pyfunc`) whose
arguments are the module (a ``.py`` file of the run's own package, as a workspace path), its
digest taken now, the function, the step's inputs, its declared ``env``, its limits and
``max_calls``. So the worker passes admission like any process tool, its crash
reconciliation and receipt are a tool step's, and the call's recorded inputs commit the
module's digest and limits. While that one call runs, the function's ``ctx.call`` requests are
admitted through the same governor with the step's ``calls.tools`` as their allowance, never
waiting on a person (``can_wait=False``): each is a recorded call of the step.

Refusals (the step fails, nothing runs): ``worker_module_invalid`` when the module is not a
file inside the package.
"""

from __future__ import annotations

import hashlib
from typing import Any

from proctor.contracts.skill import ToolStep, WorkerStep
from proctor.errors import ProctorError, RefusedCall
from proctor.runtime.admission.governor import CallSpec, Governor
from proctor.runtime.engine.host import StepDone, StepPause, StepRunner, step_failed
from proctor.runtime.engine.kinds import tool_step
from proctor.runtime.tools.pyfunc import PYFUNC_EXTRA, PyfuncHooks

__all__ = ["worker_step"]

TOOL = "worker.run"


def _literal(value: str) -> str:
    """A fixed string as step inputs hold it (a leading ``$`` is escaped, never a reference)."""
    return "$" + value if value.startswith("$") else value


def _module(run: StepRunner, step: WorkerStep) -> tuple[str, str]:
    """The module's workspace path and the digest of its bytes now.

    Raises:
        RefusedCall: ``worker_module_invalid``.
    """
    folder = run.skill.folder.resolve()
    root = run.s.workspace.root
    target = (folder / step.worker.module).resolve()
    if folder not in target.parents or not target.is_file() or root not in target.parents:
        raise RefusedCall(
            f"worker module {step.worker.module!r} is not a file of the package",
            code="worker_module_invalid",
            details={"step": step.id},
        )
    with target.open("rb") as handle:
        digest = "sha256:" + hashlib.sha256(handle.read()).hexdigest()
    return target.relative_to(root).as_posix(), digest


def worker_step(
    run: StepRunner,
    governor: Governor,
    index: int,
    step: WorkerStep,
    inputs: dict[str, Any],
    outputs: dict[str, Any],
) -> StepDone | StepPause:
    """Run the step's function once, as a governed ``worker.run`` call."""
    try:
        module, module_digest = _module(run, step)
    except ProctorError as exc:
        return step_failed(step.id, exc, TOOL)
    spec = step.worker
    as_tool = ToolStep(
        id=step.id,
        tool=TOOL,
        inputs={
            "module": _literal(module),
            "module_digest": module_digest,
            "function": spec.function,
            "inputs": step.inputs,
            "env": {name: _literal(value) for name, value in spec.env.items()},
            "limits": spec.limits.model_dump(),
            "max_calls": spec.max_calls,
            "write": spec.write,
        },
        reason=f"worker {spec.function} of {spec.module}",
    )
    allowance = frozenset(spec.calls.tools)

    def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        got = governor.call(
            CallSpec(
                tool=tool,
                args=args,
                allowance=allowance,
                step_id=step.id,
                step_index=index,
                reason=f"called by worker {spec.function}",
                can_wait=False,
            )
        )
        if got.ok:
            return {"ok": True, "result": got.result}
        error = got.error or {}
        return {
            "ok": False,
            "error": {"code": got.code or "failed", "message": str(error.get("message", ""))},
        }

    inner = governor.deliver
    armed = [True]

    def deliver(call_spec: Any, tool: Any) -> dict[str, Any]:
        extras = inner(call_spec, tool) if inner is not None else {}
        if armed[0] and tool.name == TOOL and getattr(call_spec, "step_id", None) == step.id:
            armed[0] = False  # the step's own call only, never one its function makes
            extras = {**extras, PYFUNC_EXTRA: PyfuncHooks(call=call)}
        return extras

    governor.deliver = deliver
    try:
        done = tool_step(run, governor, index, as_tool, inputs, outputs)
    finally:
        governor.deliver = inner
    if isinstance(done, StepDone) and done.outcome == "completed":
        result = done.output if isinstance(done.output, dict) else {}
        done.output = result.get("output")
    return done

"""What admission adds for a connector operation (:mod:`proctor.runtime.connectors`).

- :func:`operation_spec`: a write needs an ``idempotency_key`` (the step's, or the turn call's
  argument); without one it is refused ``idempotency_key_required`` before anything else is
  looked at or sent. The key the call is claimed and found by is the provider key: a digest of
  connector, operation and key (:func:`proctor.runtime.connectors.operations.provider_key`).
- :func:`approval_required`: an operation declared ``approval: required`` waits on a person's
  decision bound to exactly what it sends, even under ``effects: allow``.
"""

from __future__ import annotations

from dataclasses import replace

from proctor.errors import RefusedCall
from proctor.runtime.admission.calls import CallSpec
from proctor.runtime.connectors.operations import IDEMPOTENCY_ARG, OperationTool, provider_key
from proctor.runtime.tools.base import Tool

__all__ = ["approval_required", "operation_spec"]


def operation_spec(spec: CallSpec, tool: Tool | None) -> CallSpec:
    """``spec`` with a write's key in its arguments and its provider key as the idempotency key.

    Raises:
        RefusedCall: ``idempotency_key_required`` for a write with no key.
    """
    if not isinstance(tool, OperationTool) or not tool.is_write or tool.name not in spec.allowance:
        return spec
    args = dict(spec.args)
    key = args.get(IDEMPOTENCY_ARG)
    if key is None:
        key = spec.idempotency_key
    if not isinstance(key, str) or not key:
        raise RefusedCall(
            f"'{tool.name}' is a write and needs an idempotency_key (the step's idempotency_key:"
            " or the call's idempotency_key argument); nothing was sent",
            code="idempotency_key_required",
        )
    args[IDEMPOTENCY_ARG] = key
    return replace(spec, args=args, idempotency_key=provider_key(tool, key))


def approval_required(tool: Tool) -> bool:
    """True for an operation every call of which waits on a person's approval."""
    return isinstance(tool, OperationTool) and tool.approval_required

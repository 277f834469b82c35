"""What admission adds for a connector operation (:mod:`proctor.runtime.connectors`).

- :func:`operation_spec`: a connector write, or a ``store.*`` write, needs an
  ``idempotency_key`` (the step's, or the call's argument); without one it is refused
  ``idempotency_key_required`` before anything is sent. The key the call is claimed and found
  by is scoped by the run's package identity (never the name a package chose): a connector
  write's provider key is a digest of the identity, the connector and its origin, the
  operation and the key (:func:`proctor.runtime.connectors.operations.provider_key`); a store
  write's, of the identity, the tool and the key.
- :func:`admit_operation`: an operation of an MCP connector is refused before anything is asked
  or sent when its upstream call could not be sent as it stands: the exact arguments it would
  send must fit the upstream tool's pinned ``inputSchema`` (``schema_invalid``, as any tool's
  arguments), its server be configured and its tool pinned;
- :func:`approval_required`: an operation declared ``approval: required`` waits on a person's
  decision bound to exactly what it sends, even under ``effects: allow``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from proctor.contracts.values import replace
from proctor.errors import RefusedCall
from proctor.receipts.canonical import digest
from proctor.runtime.admission.calls import CallSpec
from proctor.runtime.tools.base import OPERATION_PREFIX, Tool
from proctor.runtime.tools.store import STORE_WRITES

if TYPE_CHECKING:
    from proctor.runtime.connectors.operations import OperationTool

__all__ = ["admit_operation", "approval_required", "operation_spec", "quoted"]


def _operation(tool: Tool | None) -> OperationTool | None:
    # Connector operations (and what they import) load only for a run that names one.
    if tool is None or not tool.name.startswith(OPERATION_PREFIX):
        return None
    from proctor.runtime.connectors.operations import OperationTool

    return tool if isinstance(tool, OperationTool) else None


def operation_spec(spec: CallSpec, tool: Tool | None, package: str | None = None) -> CallSpec:
    """``spec`` with a keyed write's key in its arguments and its scoped key as the
    idempotency key: a connector write's provider key, or for a ``store.*`` write a digest of
    the run's package identity (``package``), the tool and the key (so two packages' keys
    never meet).

    Raises:
        RefusedCall: ``idempotency_key_required`` for such a write with no key.
    """
    if tool is None or tool.name not in spec.allowance:
        return spec
    operation = _operation(tool)
    store_write = tool.name in STORE_WRITES
    if not store_write and not (operation is not None and operation.is_write):
        return spec
    from proctor.runtime.connectors.operations import IDEMPOTENCY_ARG, provider_key

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
    if operation is not None:
        scoped = provider_key(operation, key, package)
    else:
        scoped = "store:" + digest({"package": package, "tool": tool.name, "key": key})
    return replace(spec, args=args, idempotency_key=scoped)


def admit_operation(tool: Tool, args: dict[str, Any]) -> None:
    """Refuse an MCP operation's call that could not be sent as it stands (see the module
    docstring); nothing for any other tool.

    Raises:
        RefusedCall: ``schema_invalid`` (the arguments it would send do not fit the pinned
            ``inputSchema``), ``mcp_server_unknown``, ``tool_unpinned``,
            ``mcp_effect_weaker``, or the upstream configuration's own code.
    """
    operation = _operation(tool)
    if operation is None or operation.server is None:
        return
    from proctor.errors import ProctorError
    from proctor.runtime.connectors.operations import mcp_admit

    try:
        mcp_admit(operation, args)
    except RefusedCall:
        raise
    except ProctorError as exc:  # the configuration or the lock does not load
        raise RefusedCall(
            f"{exc.message}; nothing was sent", code=exc.code, details=exc.details
        ) from exc


def approval_required(tool: Tool) -> bool:
    """True for an operation every call of which waits on a person's approval."""
    operation = _operation(tool)
    return operation is not None and operation.approval_required


def quoted(tool: Tool) -> dict[str, Any]:
    """``{"quote": {usd_micro, per}}`` for a call record of a priced operation, else ``{}``."""
    if _operation(tool) is None:
        return {}
    from proctor.runtime.connectors.operations import quoted as operation_quoted

    return operation_quoted(tool)

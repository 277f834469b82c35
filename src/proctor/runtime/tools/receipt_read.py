"""``receipt.read``: the exact output a receipt signed, read back from the run store once the
receipt's tree verifies, optionally one value of it by JSON pointer.

A receipt signs the digest of an output, never the output itself: a ``call`` receipt the
digest of its call's result, a ``run`` receipt the digest of its run's result. The run store
retains those outputs. This tool gives a skill back exactly what was signed:

1. the receipt is looked up among the sealed runs of the caller's own tree (the runs its root
   started, as ``run.read`` reads them; or the one ``run_id`` names, which must be of that
   tree): a receipt of any other run of the workspace is refused ``receipt_not_in_tree``, one
   in no run's tree ``receipt_not_found``;
2. the tree of the run that holds it is verified under the keys the session trusts before
   anything is read (``receipt_unverified``: a tree that does not verify, or that no trusted
   key signed);
3. the retained output is read from the run store and its digest compared with the signed
   ``outputs_digest``: an output that is not there, or not the one signed (a run store edited
   after the seal), is refused ``receipt_not_retained`` and never returned;
4. ``json_pointer`` (RFC 6901) selects a value of it (``receipt_pointer_missing``), whose
   canonical JSON must fit in ``max_bytes`` (``receipt_read_too_large``: refused, never cut).

A ``step`` receipt signs no output of its own (its calls do): it is refused
``receipt_not_a_call`` with the ids of its verified children. Nothing else is loaded: no call's
arguments, no credential, no transport detail. The value passes through admission's scrubbing
like every tool result.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from proctor.errors import ToolFailed
from proctor.runtime.tools.base import Tool, ToolContext, check_cancel
from proctor.runtime.tools.receipts_tool import RECEIPTS_EXTRA
from proctor.runtime.tools.run_tools import tree_of, tree_runs

__all__ = ["RECEIPT_READ", "RECEIPT_READ_SCHEMA"]

RECEIPT_READ_SCHEMA = "proctor.receipt_read.v1"
_DEFAULT_MAX_BYTES = 1024 * 1024
_MAX_BYTES = 16 * 1024 * 1024
_MAX_WALK = 30_002
_HEX = re.compile(r"(?:sha256:)?([0-9a-f]{64})")
_MISSING = object()

Loader = Callable[[str], "bytes | None"]


def _receipt_id(text: str) -> str:
    match = _HEX.fullmatch(text.strip().lower())
    if match is None:
        raise ToolFailed(
            "receipt must be a receipt id (sha256:<hex>)", code="receipt_target_invalid"
        )
    return "sha256:" + match.group(1)


def _candidates(ctx: ToolContext, run_id: str | None) -> list[Any]:
    """The sealed runs of the caller's tree that may hold the receipt, the named one alone
    when ``run_id`` is given.

    Raises:
        ToolFailed: ``run_not_found``; ``run_not_in_tree`` (``run_id`` is of another tree).
    """
    store = ctx.store
    own = store.get_run(ctx.run_id)
    if own is None:
        raise ToolFailed(f"no run {ctx.run_id} in this workspace", code="run_not_found")
    if run_id is not None:
        record = store.get_run(run_id)
        if record is None:
            raise ToolFailed(f"no run {run_id} in this workspace", code="run_not_found")
        if tree_of(record) != tree_of(own):
            raise ToolFailed(
                f"run {run_id} is not part of this run's tree; a skill reads only the receipts"
                " of the runs its own root started",
                code="run_not_in_tree",
            )
        return [record] if record.receipt_id else []
    return [r for r in tree_runs(store, ctx.run_id) if r.receipt_id and r.run_id != ctx.run_id]


def _holds(load: Loader, root_id: str, target: str, ctx: ToolContext) -> bool:
    """Whether ``target`` is in the tree of the run receipt ``root_id`` without crossing into
    another run (a child run's receipts are that run's, a candidate of its own)."""
    from proctor.receipts.model import parse_envelope

    if root_id == target:
        return True
    pending = [root_id]
    seen = 0
    while pending and seen < _MAX_WALK:
        check_cancel(ctx)
        data = load(pending.pop())
        seen += 1
        if data is None:
            continue
        for child in parse_envelope(data).children:
            child_data = load(child.receipt_id)
            if child_data is None or parse_envelope(child_data).kind == "run":
                continue  # a child run holds its own receipts (it is a candidate itself)
            if child.receipt_id == target:
                return True
            pending.append(child.receipt_id)
    return False


def _anywhere(load: Loader, target: str) -> bool:
    return load(target) is not None


def _retained(ctx: ToolContext, holder: Any, body: dict[str, Any], target: str) -> Any:
    """The output the run store retains for the receipt, checked against its signed digest.

    Raises:
        ToolFailed: ``receipt_not_a_call`` (a step receipt), ``receipt_not_retained``.
    """
    from proctor.receipts.canonical import digest

    signed = body.get("outputs_digest")
    kind = body.get("kind")
    if kind == "step" or kind == "segment":
        from proctor.receipts.model import parse_envelope

        data = ctx.extras[RECEIPTS_EXTRA]["load"](target)
        children = [c.receipt_id for c in parse_envelope(data).children] if data else []
        raise ToolFailed(
            f"{target} is a {kind} receipt, which signs no output of its own; read one of its"
            " call receipts",
            code="receipt_not_a_call",
            details={"children": children},
        )
    if not isinstance(signed, str):
        raise ToolFailed(
            f"{target} signs no output (its {kind} did not complete)",
            code="receipt_not_retained",
        )
    found: Any = _MISSING
    if kind == "run" and holder.receipt_id == target:
        envelope = holder.data.get("envelope") or {}
        if isinstance(envelope, dict) and digest(envelope.get("result")) == signed:
            found = envelope.get("result")
    elif kind == "call":
        subject = body.get("subject") or {}
        for call in ctx.store.step_calls(holder.run_id, subject.get("step_id")):
            settled = call.result if isinstance(call.result, dict) else {}
            if (
                call.tool == subject.get("tool")
                and settled.get("status") == "completed"
                and digest(settled.get("result")) == signed
            ):
                found = settled.get("result")
                break
    if found is _MISSING:
        raise ToolFailed(
            f"the run store retains no output of {target} with the digest it signed (it was"
            " never kept here, or was changed after the seal)",
            code="receipt_not_retained",
        )
    return found


def _select(value: Any, pointer: str) -> Any:
    if pointer == "":
        return value
    current = value
    for raw in pointer.split("/")[1:]:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(current, dict) and key in current:
            current = current[key]
        elif (
            isinstance(current, list)
            and key.isdigit()
            and key.isascii()
            and (key == "0" or not key.startswith("0"))
            and int(key) < len(current)
        ):
            current = current[int(key)]
        else:
            raise ToolFailed(
                f"json_pointer {pointer} selects nothing in the output",
                code="receipt_pointer_missing",
            )
    return current


def _read(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    from proctor.receipts.canonical import canonical
    from proctor.receipts.model import parse_envelope
    from proctor.receipts.verify import verify_tree

    seam = ctx.extras.get(RECEIPTS_EXTRA)
    if not isinstance(seam, dict):
        raise ToolFailed(
            "receipt.read reads the receipts of the run's own workspace and has none here",
            code="receipts_unavailable",
        )
    load: Loader = seam["load"]
    target = _receipt_id(str(args["receipt"]))
    run_id = args.get("run_id")
    holder = None
    for record in _candidates(ctx, str(run_id) if run_id else None):
        if _holds(load, record.receipt_id, target, ctx):
            holder = record
            break
    if holder is None:
        if _anywhere(load, target):
            raise ToolFailed(
                f"{target} is not a receipt of this run's tree; a skill reads only the receipts"
                " of the runs its own root started",
                code="receipt_not_in_tree",
            )
        raise ToolFailed(f"no receipt {target} in this run's tree", code="receipt_not_found")
    # verified before anything of it is read
    result = verify_tree(holder.receipt_id, load, seam["keys"])
    if result.status != "verified":
        raise ToolFailed(
            f"the receipt tree of run {holder.run_id} does not verify ({result.reason}): "
            "nothing of it is read",
            code="receipt_unverified",
        )
    data = load(target)
    if data is None:  # a verified tree holds every receipt; a guard, not a path
        raise ToolFailed(f"no receipt {target} in this run's tree", code="receipt_not_found")
    body = parse_envelope(data).body
    value = _select(_retained(ctx, holder, body, target), str(args.get("json_pointer", "")))
    size = len(canonical(value))
    limit = int(args.get("max_bytes") or _DEFAULT_MAX_BYTES)
    if size > limit:
        raise ToolFailed(
            f"the selection takes {size} bytes as JSON, over max_bytes {limit}; select less"
            " with json_pointer (a selection is refused, never cut)",
            code="receipt_read_too_large",
        )
    return {
        "schema": RECEIPT_READ_SCHEMA,
        "receipt_id": target,
        "run_id": holder.run_id,
        "kind": body["kind"],
        "step": (body.get("subject") or {}).get("step_id"),
        "json_pointer": str(args.get("json_pointer", "")),
        "value": value,
        "bytes": size,
        "verification": result.status,
    }


RECEIPT_READ = Tool(
    name="receipt.read",
    description=(
        "Read the exact output a receipt of this run's tree signed (a call's result or a run's"
        " result), after verifying its tree; json_pointer selects one value of it."
    ),
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["receipt"],
        "properties": {
            "receipt": {"type": "string", "minLength": 1, "maxLength": 80},
            "run_id": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
            "json_pointer": {
                "type": "string",
                "maxLength": 4096,
                "pattern": "^(/([^~/]|~[01])*)*$",
            },
            "max_bytes": {"type": "integer", "minimum": 1, "maximum": _MAX_BYTES},
        },
    },
    effect="read",
    handler=_read,
    output_schema={
        "type": "object",
        "required": ["schema", "receipt_id", "run_id", "kind", "value", "bytes", "verification"],
        "properties": {
            "schema": {"const": RECEIPT_READ_SCHEMA},
            "receipt_id": {"type": "string"},
            "run_id": {"type": "string"},
            "kind": {"type": "string"},
            "step": {"type": ["string", "null"]},
            "json_pointer": {"type": "string"},
            "value": {},
            "bytes": {"type": "integer"},
            "verification": {"const": "verified"},
        },
    },
)
"""The ``receipt.read`` tool."""

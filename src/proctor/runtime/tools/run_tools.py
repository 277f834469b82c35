"""``run.read``: a skill reads its own run (or another run of its tree) from the run store.

What it returns is what ``proctor history RUN --json`` shows a host, in the shape a program
pages through: the run's state, every request with the digest an answer binds to, and its
events after a cursor (``after``, the ``seq`` of the last event already read), at most
``limit`` of them, with ``next_cursor`` to pass back.

Refused: a run of another tree (``run_not_in_tree``: a skill reads the runs its own root
started, never another person's run in the same workspace), a run the store does not hold
(``run_not_found``), a run id that is not one (``run_id_invalid`` by the schema). Values pass
through admission's scrubbing like every tool result, so a secret never comes back.
"""

from __future__ import annotations

from typing import Any

from proctor.errors import ToolFailed
from proctor.runtime.tools.base import Tool, ToolContext

__all__ = ["RUN_READ", "RUN_READ_SCHEMA", "tree_of", "tree_runs"]

RUN_READ_SCHEMA = "proctor.run_read.v1"
_DEFAULT_LIMIT = 200
_MAX_LIMIT = 1000


_TREE_SCAN = 500
"""The newest runs of the workspace searched for the runs of a tree."""


def tree_of(record: Any) -> str:
    """The root run of the tree ``record`` belongs to (a root is its own)."""
    tree = record.data.get("tree")
    return tree if isinstance(tree, str) else record.run_id


_tree = tree_of


def tree_runs(store: Any, run_id: str) -> list[Any]:
    """The runs of ``run_id``'s tree among the workspace's newest :data:`_TREE_SCAN` runs,
    newest first (``run_id`` itself included); empty when the store does not hold it."""
    own = store.get_run(run_id)
    if own is None:
        return []
    tree = tree_of(own)
    found = [r for r in store.list_runs(limit=_TREE_SCAN) if tree_of(r) == tree]
    if not any(r.run_id == run_id for r in found):
        found.insert(0, own)
    return found


def _read(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    store = ctx.store
    own = store.get_run(ctx.run_id)
    target_id = str(args.get("run_id") or ctx.run_id)
    record = own if target_id == ctx.run_id else store.get_run(target_id)
    if record is None or own is None:
        raise ToolFailed(f"no run {target_id} in this workspace", code="run_not_found")
    if _tree(record) != _tree(own):
        raise ToolFailed(
            f"run {target_id} is not part of this run's tree; a skill reads only the runs its"
            " own root started",
            code="run_not_in_tree",
        )
    after = int(args.get("after") or 0)
    limit = int(args.get("limit") or _DEFAULT_LIMIT)
    # one more than the page: whether another page follows, without reading the rest
    events = store.events(record.run_id, after=after, limit=limit + 1)
    page = events[:limit]
    requests = [
        {
            "address": r.address,
            "kind": r.kind,
            "state": r.state,
            "request_digest": r.request_digest,
        }
        for r in store.requests(record.run_id)
    ]
    return {
        "schema": RUN_READ_SCHEMA,
        "run_id": record.run_id,
        "skill": record.skill,
        "method": record.method,
        "status": record.status,
        "outcome": record.outcome,
        "receipt_id": record.receipt_id,
        "requests": requests,
        "events": page,
        "next_cursor": int(page[-1]["seq"]) if len(events) > limit else None,
    }


RUN_READ = Tool(
    name="run.read",
    description=(
        "Read this run (or another run of its tree, by run_id): its state, the requests it"
        " waits on with their digests, and its events after a cursor."
    ),
    schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "run_id": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
            "after": {"type": "integer", "minimum": 0, "maximum": 2**53 - 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": _MAX_LIMIT},
        },
    },
    effect="read",
    handler=_read,
    output_schema={
        "type": "object",
        "required": ["schema", "run_id", "status", "requests", "events", "next_cursor"],
        "properties": {
            "schema": {"const": RUN_READ_SCHEMA},
            "run_id": {"type": "string"},
            "skill": {"type": "string"},
            "method": {"type": "string"},
            "status": {"type": "string"},
            "outcome": {"type": ["string", "null"]},
            "receipt_id": {"type": ["string", "null"]},
            "requests": {"type": "array"},
            "events": {"type": "array"},
            "next_cursor": {"type": ["integer", "null"]},
        },
    },
)
"""The ``run.read`` tool."""

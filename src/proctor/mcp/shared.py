"""What the MCP server and its turn tools share: the served configuration, the session pool,
and how an envelope or a refusal reads to a model.

:class:`TurnHost` is what the turn tools (:mod:`proctor.mcp.turns`) use of the server that
dispatches to them, so the server imports the turn tools and never the other way round.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import mcp_types as types

from proctor.contracts.values import dataclass, field
from proctor.errors import ProctorError
from proctor.mcp.next_steps import next_steps
from proctor.receipts.jsontext import reusable_encoder

if TYPE_CHECKING:
    from proctor.core.authority import Authority
    from proctor.mcp.catalog import Catalog
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

__all__ = [
    "PoolBusy",
    "ServerConfig",
    "SessionPool",
    "TurnHost",
    "compact_nullables",
    "error_result",
    "run_content",
    "summarize",
    "token_id",
    "tool_result",
]

T = TypeVar("T")

FAILED_OUTCOMES = frozenset({"failed", "blocked", "killed"})
"""The outcomes a tool result marks ``isError``."""

# json.dumps(value, ensure_ascii=False, sort_keys=True), from one C encoder built once
_sorted_text = reusable_encoder(sort_keys=True, separators=(", ", ": "))


def token_id(key: str) -> str:
    """The public identity of an API key: ``tok_`` + the first 12 hex digits of its SHA-256."""
    return "tok_" + hashlib.sha256(key.encode("ascii")).hexdigest()[:12]


@dataclass
class ServerConfig:
    """What one ``proctor mcp`` process serves.

    Attributes:
        workspace: the workspace (one snapshot taken at startup).
        catalog: the served skill tools (empty with ``--run``), replaced when a served
            package changes (:meth:`proctor.mcp.server.ProctorServer.catalog`).
        environ: the environment the sessions read.
        authority: the saved preset applied with ``--authority NAME`` (``None``: the managed
            default, ``effects: ask, reach: workspace``).
        authority_name: that preset's name, for the audit log.
        run_scope: with ``--run RUN_ID``, the one run this server works.
        transport: ``stdio`` or ``http`` (recorded in the audit log).
        pool_size: how many runs may be driven at once (one session each).
        runs: the paused runs this server's own calls opened, in order (the turn tools' scope).
    """

    workspace: Workspace
    catalog: Catalog
    environ: Mapping[str, str]
    authority: Authority | None = None
    authority_name: str | None = None
    run_scope: str | None = None
    transport: str = "stdio"
    pool_size: int = 4
    runs: dict[str, None] = field(default_factory=dict)
    console_url: str | None = None
    """The console (``proctor serve``) a URL-mode elicitation sends a person to."""
    trust_client_approvals: bool = False
    """The operator's opt-in: a client's form-mode accept approves (``client-relayed``)."""
    refs: tuple[str, ...] = ()
    """The skill references served, as given (the catalog is rebuilt from them)."""
    cwd: Path | None = None
    """Where the references start (the folder ``proctor mcp`` was started in)."""


class PoolBusy(Exception):
    """Every session of the pool is in use (:meth:`SessionPool.use` told not to wait)."""


class SessionPool:
    """Driver sessions, one per worker thread at a time, created on demand up to ``size``."""

    def __init__(self, factory: Callable[[], Session], size: int) -> None:
        self._factory = factory
        self._free: list[Session] = []
        self._all: list[Session] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)

    def use(self, fn: Callable[[Session], T], *, blocking: bool = True) -> T:
        """Run ``fn`` with a session no other thread holds (blocks while all are busy).

        Raises:
            PoolBusy: not ``blocking``, and no session made before is free (one is never made
                then: opening a session takes a while, and the caller would rather not wait).
        """
        if not self._slots.acquire(blocking):
            raise PoolBusy
        try:
            with self._lock:
                session = self._free.pop() if self._free else None
            if session is None and not blocking:
                raise PoolBusy
            if session is None:
                session = self._factory()
                with self._lock:
                    self._all.append(session)
            try:
                return fn(session)
            finally:
                with self._lock:
                    self._free.append(session)
        finally:
            self._slots.release()

    def close(self) -> None:
        """Close every session."""
        with self._lock:
            for session in self._all:
                session.close()
            self._all.clear()
            self._free.clear()


_NULL = {"type": "null"}
# Keywords that constrain only values of one type (a null passes them) or only annotate.
_TYPED_KEYWORDS = frozenset(
    {
        "type", "title", "description", "default", "examples", "$comment", "format",
        "properties", "additionalProperties", "required", "patternProperties", "propertyNames",
        "minProperties", "maxProperties", "dependentRequired",
        "items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains",
        "minLength", "maxLength", "pattern",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    }
)  # fmt: skip


def compact_nullables(schema: Any) -> Any:
    """``schema`` with each two-way ``anyOf`` of a typed schema and ``{"type": "null"}`` folded
    into one schema that says the same: ``{"type": [T, "null"], ...}`` (an ``enum`` gains
    ``null`` instead). The documents it accepts are exactly those ``schema`` accepts.

    A client validates every structured result against the tool's output schema (the SDK's
    client does, with ``jsonschema``): an ``anyOf`` costs it a sub-validator per branch on
    every optional field, a list of types one check.
    """
    if isinstance(schema, list):
        return [compact_nullables(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: compact_nullables(value) for key, value in schema.items()}
    branches = out.get("anyOf")
    if not (isinstance(branches, list) and len(branches) == 2 and _NULL in branches):
        return out
    other = branches[0] if branches[1] == _NULL else branches[1]
    if not isinstance(other, dict) or set(other) & (set(out) - {"anyOf"}):
        return out  # a keyword on both levels would have to hold twice: left as it is
    rest = {key: value for key, value in out.items() if key != "anyOf"}
    kind = other.get("type")
    if isinstance(kind, str) and kind != "null" and set(other) <= _TYPED_KEYWORDS:
        return {**rest, **other, "type": [kind, "null"]}
    if set(other) == {"enum"} and isinstance(other["enum"], list):
        return {**rest, "enum": [*other["enum"], *([] if None in other["enum"] else [None])]}
    return out


def summarize(doc: Mapping[str, Any], console_url: str | None = None) -> str:
    """A one-paragraph text summary of a ``proctor.run.v1`` envelope for a model to read; a
    paused run's names the next step of each request (:func:`proctor.mcp.next_steps.next_steps`,
    with the console's pages when ``console_url`` is given)."""
    where = f"{doc.get('skill')}#{doc.get('method')}"
    status = doc.get("status")
    if status == "needs_credential":
        names = ", ".join(str(r.get("credential")) for r in doc.get("requests") or [])
        return f"{where} needs credentials before it can run: {names}. Nothing was run."
    run = f"run {doc.get('run_id')}"
    if status != "sealed":
        requests = doc.get("requests") or []
        lines = [f"{where} paused ({status}), {run}, waiting on {len(requests)} request(s):"]
        lines += next_steps(doc, console_url)
        lines.append(
            "The run's whole envelope (requests, digests, diffs) is the JSON part of this result."
        )
        return "\n".join(lines)
    text = f"{where} {doc.get('outcome')}, {run}, receipt {doc.get('receipt_id')}."
    refusal = doc.get("refusal")
    if refusal:
        text += f" Refused [{refusal.get('code')}]: {refusal.get('message')}"
    elif doc.get("result") is not None:
        result = _sorted_text(doc["result"])
        text += " Result: " + (result if len(result) <= 2_000 else result[:2_000] + "…")
    return text


def run_content(doc: Mapping[str, Any], console_url: str | None = None) -> list[types.ContentBlock]:
    """The text parts of a result carrying a ``proctor.run.v1`` envelope: the human summary,
    then the whole envelope as JSON (the same document as the structured content, so the same
    bounds hold), for clients that hand a model only the text."""
    return [types.TextContent(text=text) for text in _texts(doc, console_url)]


def _texts(doc: Mapping[str, Any], console_url: str | None) -> tuple[str, str]:
    return summarize(doc, console_url), _sorted_text(doc)


def tool_result(doc: Mapping[str, Any], console_url: str | None = None) -> dict[str, Any]:
    """The wire form of a ``tools/call`` result carrying the envelope ``doc``: exactly what the
    SDK dumps from ``CallToolResult(content=run_content(doc), structured_content=doc,
    is_error=...)``, built without the model (the SDK checks the wire form against the
    protocol's schema either way). ``isError`` marks a failed, blocked or killed run."""
    summary, whole = _texts(doc, console_url)
    return {
        "content": [{"type": "text", "text": summary}, {"type": "text", "text": whole}],
        "structuredContent": doc,
        "isError": doc.get("outcome") in FAILED_OUTCOMES,
        "resultType": "complete",
    }


def error_result(exc: ProctorError) -> types.CallToolResult:
    """A refusal or failure that opened no run, as a tool error a model can read."""
    from proctor.runtime.boundary.sanitize import scrub_text

    return types.CallToolResult(
        content=[
            types.TextContent(text=f"error[{exc.code}]: {scrub_text(exc.message, own=exc.own)}")
        ],
        is_error=True,
    )


class TurnHost(Protocol):
    """What the turn tools use of the server dispatching to them."""

    pool: SessionPool

    def audit(self, event: str, run_id: str | None = None, **fields: Any) -> None: ...

    def run_in_worker(
        self,
        fn: Callable[[threading.Event], T],
        *,
        report: Callable[[int], Awaitable[None]] | None = None,
        every: float = ...,
    ) -> Awaitable[T]: ...

"""Models of a connector manifest (``connectors/<name>/connector.yaml``).

A connector names one provider: either its ``base_url`` (whose origin is the only place its
operations send to, and its credential's audience) and the credential requirement it uses, or
``mcp``: an upstream MCP server of the workspace's ``.mcp.json`` (whose credential is the
server's own ``[mcp.<server>] credential``); and its ``operations``. Each operation is a read
or a write, with an HTTP request template (``request``) or an upstream tool call (``mcp``)
built from its declared ``inputs``; a write may declare a ``readback`` (a read operation and
the JSON pointers that must match) so a crash after sending is reconciled without sending it
again.

Every model is strict, refuses unknown fields and is frozen. Checks across fields (a
placeholder naming an input, a readback naming a read operation) live in
:mod:`proctor.parser.connector`, which builds these models.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from proctor.contracts.strict import Record, Rule, field

__all__ = [
    "CONNECTOR_NAME_PATTERN",
    "MCP_SERVER_PATTERN",
    "OPERATION_NAME_PATTERN",
    "Connector",
    "McpCall",
    "Operation",
    "OperationCost",
    "Readback",
    "RequestTemplate",
]

CONNECTOR_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
OPERATION_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,63}(\.[a-z][a-z0-9_-]{0,63}){0,3}$"
MCP_SERVER_PATTERN = r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,62}$"
JsonSchema = dict[str, Any]
NonEmpty = Annotated[str, Rule(min_length=1, max_length=4096)]


class RequestTemplate(Record):
    """How an operation's inputs become one HTTP request.

    ``path`` starts with ``/`` and may hold ``{name}`` placeholders (each an input, sent
    percent-encoded so it never leaves the path segment); ``query`` and ``json`` values may be
    ``$input.NAME`` references or literals.
    """

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
    path: Annotated[str, Rule(min_length=1, max_length=2048, pattern=r"^/")]
    query: dict[NonEmpty, Any] = field(default_factory=dict)
    json_body: Annotated[Any, Rule(alias="json")] = None


class McpCall(Record):
    """How an operation's inputs become one call of an upstream MCP tool: the tool's name on
    the connector's server, and its ``arguments`` (values may be ``$input.NAME`` references or
    literals; a reference to an optional input that was not given is left out)."""

    tool: Annotated[str, Rule(pattern=r"^[A-Za-z0-9_.-]{1,128}$")]
    arguments: dict[NonEmpty, Any] = field(default_factory=dict)


class Readback(Record):
    """What a write's effect looks like when read: a read operation, its inputs, and the JSON
    pointers into its result that must equal the given values (references to the write's
    inputs)."""

    operation: NonEmpty
    inputs: dict[NonEmpty, Any] = field(default_factory=dict)
    match: Annotated[dict[NonEmpty, Any], Rule(min_length=1)]


class OperationCost(Record):
    """The quoted price of one call, in millionths of a US dollar: ``per: call`` (or
    ``request``) once the request may have left, ``per: success`` only when the provider
    answered as the operation accepts."""

    usd_micro: Annotated[int, Rule(ge=0, le=10**12)]
    per: Literal["call", "request", "success"]


class Operation(Record):
    """One declared provider call."""

    description: NonEmpty | None = None
    verb: Literal["read", "write"]
    request: RequestTemplate | None = None
    mcp: McpCall | None = None
    inputs: JsonSchema = field(
        default_factory=lambda: {"type": "object", "properties": {}, "additionalProperties": False}
    )
    result: dict[NonEmpty, str] | None = None
    approval: Literal["required"] | None = None
    readback: Readback | None = None
    cost: OperationCost | None = None


class Connector(Record):
    """A validated connector manifest."""

    name: Annotated[str, Rule(pattern=CONNECTOR_NAME_PATTERN)]
    description: NonEmpty | None = None
    base_url: NonEmpty | None = None
    mcp: Annotated[str, Rule(pattern=MCP_SERVER_PATTERN)] | None = None
    credential: NonEmpty | None = None
    operations: Annotated[
        dict[Annotated[str, Rule(pattern=OPERATION_NAME_PATTERN)], Operation],
        Rule(min_length=1, max_length=256),
    ]

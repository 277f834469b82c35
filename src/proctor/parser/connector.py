"""Read ``connectors/<name>/connector.yaml`` into a :class:`~proctor.contracts.connector.Connector`.

The manifest is read by the strict YAML loader, validated by the strict model, then checked as
a whole: the base URL is an absolute ``https`` (or loopback ``http``) URL without credentials,
query or fragment; every ``{placeholder}`` of a path and every ``$input.NAME`` of a template
names a declared input; inputs schemas are valid draft-07 object schemas that do not declare
``idempotency_key`` (proctor's own argument of a write); a readback names a read operation of
the same connector; the name matches the folder it was found in. A connector reaches its
provider one way: a ``base_url`` (every operation an HTTP ``request``) or ``mcp``, an upstream
MCP server (every operation an ``mcp`` tool call, the credential the server's own).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from proctor.contracts.connector import Connector, Operation
from proctor.contracts.strict import StrictError
from proctor.errors import ParseError, ProctorError
from proctor.parser.refs import collect_refs
from proctor.parser.skill import _at, _check_schema, format_path, invalid_at
from proctor.parser.yaml_strict import Path, Positions, load_yaml_with_positions

__all__ = ["MCP_ORIGIN_PREFIX", "connector_origin", "origin_of", "parse_connector"]

MCP_ORIGIN_PREFIX = "mcp:"
"""An MCP connector's origin is ``mcp:<server>``: what its provider keys are scoped by."""

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def parse_connector(text: str, source: str, *, folder_name: str | None = None) -> Connector:
    """Read a connector manifest.

    Raises:
        ParseError: YAML refused by the strict loader; ``connector_not_mapping``;
            ``connector_unknown_field`` / ``connector_missing_field`` / ``connector_invalid``
            naming the field's path; ``connector_base_url_invalid``; ``connector_name_mismatch``;
            ``schema_invalid``; ``connector_placeholder_unknown``; ``invalid_reference``;
            ``reference_unknown_input``; ``readback_unknown``; ``readback_not_read``;
            ``operation_input_reserved``; ``connector_invalid`` also for a connector with
            both or neither of ``base_url`` and ``mcp``, an MCP connector naming a
            ``credential``, or an operation whose ``request`` / ``mcp`` does not fit its
            connector.
    """
    data, positions = load_yaml_with_positions(text, source=source)
    if not isinstance(data, dict):
        raise _at(
            source, positions, (), "connector.yaml must be a mapping", "connector_not_mapping"
        )
    try:
        connector = Connector.model_validate(data)
    except StrictError as exc:
        raise _translate(exc, source, positions) from None
    if folder_name is not None and connector.name != folder_name:
        raise _at(
            source,
            positions,
            ("name",),
            f"the connector is named {connector.name!r} but lives in connectors/{folder_name}/",
            "connector_name_mismatch",
        )
    _check_transport(connector, source, positions)
    for name, op in connector.operations.items():
        _check_operation(connector, name, op, ("operations", name), source, positions)
    return connector


def _check_transport(connector: Connector, source: str, positions: Positions) -> None:
    if (connector.base_url is None) == (connector.mcp is None):
        raise _at(
            source,
            positions,
            ("base_url",) if connector.base_url is not None else (),
            "a connector reaches its provider one way: 'base_url' (HTTP operations) or 'mcp'"
            " (an upstream MCP server of .mcp.json), not both and not neither",
            "connector_invalid",
        )
    if connector.base_url is not None:
        try:
            connector_origin(connector.base_url)
        except ParseError as exc:
            raise _at(source, positions, ("base_url",), exc.message, exc.code) from None
    elif connector.credential is not None:
        raise _at(
            source,
            positions,
            ("credential",),
            "an MCP connector's credential is its server's: set it in proctor.toml"
            f" [mcp.{connector.mcp}] credential, where the adapter delivers it",
            "connector_invalid",
        )
    want = "request" if connector.base_url is not None else "mcp"
    for name, op in connector.operations.items():
        given = op.request if want == "request" else op.mcp
        other = op.mcp if want == "request" else op.request
        if given is None or other is not None:
            kind = "an HTTP" if want == "request" else "an MCP"
            raise _at(
                source,
                positions,
                ("operations", name),
                f"{name}: an operation of {kind} connector has '{want}' (and not"
                f" '{'mcp' if want == 'request' else 'request'}')",
                "connector_invalid",
            )


def origin_of(connector: Connector) -> str:
    """Where a (parsed) connector's operations go: its base URL's origin, or ``mcp:<server>``.

    Raises:
        ParseError: ``connector_base_url_invalid`` (as :func:`connector_origin`).
    """
    if connector.mcp is not None:
        return MCP_ORIGIN_PREFIX + connector.mcp
    assert connector.base_url is not None  # parse_connector keeps exactly one
    return connector_origin(connector.base_url)


def connector_origin(base_url: str) -> str:
    """The origin (``scheme://host:port``) of a connector's base URL.

    Raises:
        ParseError: ``connector_base_url_invalid``: not absolute, not https (plain http only to
            a loopback host), or carrying credentials, a query or a fragment.
    """
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError as exc:
        raise ParseError("base_url is not a valid URL", code="connector_base_url_invalid") from exc
    host = (parts.hostname or "").lower()
    problem = None
    if parts.scheme not in ("https", "http") or not host:
        problem = "base_url must be an absolute https:// URL"
    elif parts.scheme == "http" and host not in _LOOPBACK:
        problem = "base_url must use https (plain http only to a loopback host)"
    elif parts.username is not None or parts.password is not None:
        problem = "base_url may not carry credentials; name a credential instead"
    elif parts.query or parts.fragment:
        problem = "base_url may not carry a query or a fragment"
    if problem is not None:
        raise ParseError(problem, code="connector_base_url_invalid")
    default = 443 if parts.scheme == "https" else 80
    shown = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{shown}:{port or default}"


def _check_operation(
    connector: Connector, name: str, op: Operation, at: Path, source: str, positions: Positions
) -> None:
    _check_schema(op.inputs, (*at, "inputs"), source, positions)
    if op.inputs.get("type") != "object":
        raise _at(
            source, positions, (*at, "inputs"), "inputs must be an object schema", "schema_invalid"
        )
    declared = set((op.inputs.get("properties") or {}).keys())
    if "idempotency_key" in declared:
        raise _at(
            source,
            positions,
            (*at, "inputs", "properties", "idempotency_key"),
            "idempotency_key is proctor's own argument of a write; name the input otherwise",
            "operation_input_reserved",
        )
    if op.request is not None:
        for placeholder in _PLACEHOLDER.findall(op.request.path):
            if placeholder not in declared or not _NAME.match(placeholder):
                raise _at(
                    source,
                    positions,
                    (*at, "request", "path"),
                    f"path placeholder {{{placeholder}}} is not a declared input of {name}",
                    "connector_placeholder_unknown",
                )
        _check_refs(op.request.query, (*at, "request", "query"), declared, source, positions)
        _check_refs(op.request.json_body, (*at, "request", "json"), declared, source, positions)
    if op.mcp is not None:
        _check_refs(op.mcp.arguments, (*at, "mcp", "arguments"), declared, source, positions)
    if op.result is not None:
        for key, pointer in op.result.items():
            if pointer and not pointer.startswith("/"):
                raise _at(
                    source,
                    positions,
                    (*at, "result", key),
                    "a result mapping is a JSON pointer ('' or starting with '/')",
                    "connector_invalid",
                )
    if op.readback is not None:
        if op.verb != "write":
            raise _at(
                source,
                positions,
                (*at, "readback"),
                "only a write declares a readback",
                "connector_invalid",
            )
        target = connector.operations.get(op.readback.operation)
        if target is None:
            raise _at(
                source,
                positions,
                (*at, "readback", "operation"),
                f"readback names {op.readback.operation!r}, which is not an operation of"
                f" {connector.name}",
                "readback_unknown",
            )
        if target.verb != "read":
            raise _at(
                source,
                positions,
                (*at, "readback", "operation"),
                f"readback operation {op.readback.operation!r} must be a read",
                "readback_not_read",
            )
        _check_refs(op.readback.inputs, (*at, "readback", "inputs"), declared, source, positions)
        _check_refs(op.readback.match, (*at, "readback", "match"), declared, source, positions)
        for pointer in op.readback.match:
            if not pointer.startswith("/"):
                raise _at(
                    source,
                    positions,
                    (*at, "readback", "match"),
                    "readback match keys are JSON pointers starting with '/'",
                    "connector_invalid",
                )


def _check_refs(
    value: Any, at: Path, declared: set[str], source: str, positions: Positions
) -> None:
    try:
        refs = collect_refs(value)
    except ProctorError as exc:
        raise _at(source, positions, at, exc.message, exc.code) from None
    for ref in refs:
        if ref.root != "input":
            raise _at(
                source,
                positions,
                at,
                f"{ref.text}: a connector template may reference only $input.NAME",
                "invalid_reference",
            )
        if ref.name not in declared:
            raise _at(
                source,
                positions,
                at,
                f"{ref.text} names no declared input",
                "reference_unknown_input",
            )


def _translate(exc: StrictError, source: str, positions: Positions) -> ParseError:
    path: Path = exc.loc
    where = format_path(path)
    if exc.kind == "extra_forbidden":
        return _at(source, positions, path, f"unknown field {where}", "connector_unknown_field")
    if exc.kind == "missing":
        return _at(source, positions, path, f"missing field {where}", "connector_missing_field")
    return _at(source, positions, path, invalid_at(where, exc), "connector_invalid")

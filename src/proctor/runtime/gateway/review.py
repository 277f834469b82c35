"""What a person does with pins: pin a server's tools, see what changed, approve a change.

``proctor mcp pin|diff|approve`` call these. Each connects to the servers named (a stdio one in
its sandbox), lists their tools and compares them with ``proctor-mcp.lock``. An approval
names the digest of the definition the person saw: when the server's definition changed again
since, the approval is refused and nothing is pinned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proctor.errors import UsageError
from proctor.runtime.gateway.pins import definition_digest, diff_lines
from proctor.runtime.gateway.upstreams import Upstreams

__all__ = ["approve_change", "pin_servers", "tool_changes"]


def _servers(upstreams: Upstreams, names: Sequence[str]) -> list[str]:
    known = sorted(upstreams.config.servers)
    for name in names:
        if name not in upstreams.config.servers:
            raise UsageError(
                f"no upstream server {name!r} in {upstreams.config.source}; known: "
                + (", ".join(known) or "none"),
                code="mcp_server_unknown",
            )
    return list(names) or known


def pin_servers(upstreams: Upstreams, names: Sequence[str]) -> dict[str, list[str]]:
    """Pin every tool of each server named (all when none) that is not pinned yet; the tools
    pinned per server. A pinned tool is never re-pinned here (that is :func:`approve_change`).

    Raises:
        UsageError: ``mcp_server_unknown``.
        RefusedCall, ToolFailed: the server cannot be started or reached.
    """
    return {server: upstreams.pin_new(server) for server in _servers(upstreams, names)}


def tool_changes(upstreams: Upstreams, names: Sequence[str]) -> list[dict[str, Any]]:
    """Each tool whose live definition differs from its pin (or is new, or gone), with the
    unified diff of the two definitions and the live digest an approval names.

    ``names``: servers, or ``server/tool``; all servers when empty.

    Raises:
        UsageError: ``mcp_server_unknown``.
    """
    wanted: dict[str, set[str] | None] = {}
    for name in names:
        server, _, tool = name.partition("/")
        if tool:
            entry = wanted.setdefault(server, set())
            if entry is not None:
                entry.add(tool)
        else:
            wanted[server] = None
    out: list[dict[str, Any]] = []
    pinned_all = upstreams.pins.read()
    for server in _servers(upstreams, list(wanted)):
        live = upstreams.live(server)
        pinned = pinned_all.get(server, {})
        only = wanted.get(server)
        for tool in sorted(set(live) | set(pinned)):
            if only is not None and tool not in only:
                continue
            old, new = pinned.get(tool), live.get(tool)
            if (
                old is not None
                and new is not None
                and definition_digest(old) == (definition_digest(new))
            ):
                continue
            out.append(
                {
                    "server": server,
                    "tool": tool,
                    "change": "new" if old is None else "removed" if new is None else "changed",
                    "pinned_digest": None if old is None else definition_digest(old),
                    "upstream_digest": None if new is None else definition_digest(new),
                    "diff": diff_lines(old, new),
                }
            )
    return out


def approve_change(
    upstreams: Upstreams, target: str, digest: str, *, decided_by: str | None = None
) -> Mapping[str, Any]:
    """Pin ``server/tool``'s live definition, which must have ``digest`` (what the person
    saw in ``diff``).

    Raises:
        UsageError: ``mcp_approve_target_invalid``; ``mcp_server_unknown``;
            ``mcp_approve_stale`` (the live definition's digest is not ``digest``: it changed
            again, or the tool is gone); nothing is pinned.
    """
    server, _, tool = target.partition("/")
    if not server or not tool:
        raise UsageError(
            "name the tool to approve as SERVER/TOOL", code="mcp_approve_target_invalid"
        )
    _servers(upstreams, [server])
    live = upstreams.live(server).get(tool)
    now = None if live is None else definition_digest(live)
    if live is None or now != digest:
        raise UsageError(
            f"the definition of {server}/{tool} is not the one approved (its digest now is"
            f" {now}); run `proctor mcp diff {server}/{tool}` again; nothing was pinned",
            code="mcp_approve_stale",
        )
    upstreams.pins.pin(server, {tool: live}, replace=True)
    return {"server": server, "tool": tool, "digest": digest, "decided_by": decided_by}

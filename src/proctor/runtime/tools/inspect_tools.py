"""Read-only facts for the review core skills: ``skills.inspect`` and ``audit.summary``.

``skills.inspect`` reads a skill package inside the reach (its ``path`` is contained like any
read) and returns what it asks for: each method's effects and reach, every step's tool, skill,
operation or agent allowance, credentials and how they are delivered, literal URLs it calls,
and deterministic least-privilege findings. It returns no file contents except names.

``audit.summary`` reads this workspace's audit log, or, when ``path`` names one, an audit log
file inside the reach (an exported copy; contained like any read), and counts refusals and
warnings by tool, code and rule, newest first, with a bounded list of examples. Messages are
not returned, only codes, so no refused argument is repeated.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

from proctor.errors import ToolFailed
from proctor.runtime.tools.base import Access, Tool, ToolContext

__all__ = ["AUDIT_SUMMARY", "CHANGING_TOOLS", "SKILLS_INSPECT"]

# the native tools whose effect is write, network or process (tests/runtime/tools pins the list)
CHANGING_TOOLS = frozenset(
    {
        "command.execute",
        "fs.apply_bundle",
        "fs.delete",
        "fs.edit",
        "fs.restore",
        "fs.write",
        "http.request",
        "process.resize",
        "process.start",
        "process.stop",
        "process.write",
        "store.events.append",
        "store.key.put",
        "worker.run",
    }
)
_MAX_EXAMPLES = 20
_MAX_LINES = 200_000


def _path_arg(args: Any) -> list[tuple[str, Access]]:
    path = args.get("path")
    return [(path if isinstance(path, str) else ".", "list")]


def _step_facts(step: Any) -> dict[str, Any]:
    data = step.model_dump(exclude_none=True)
    fact: dict[str, Any] = {"id": step.id}
    for kind in ("tool", "skill", "operation"):
        if kind in data:
            fact.update(kind=kind, name=data[kind])
    if isinstance(data.get("tool"), dict):  # an inline process tool runs as command.execute
        fact.update(kind="process", name="command.execute", command=data["tool"]["command"])
    elif "wait" in data:
        fact["kind"] = "wait"
    for narrowed in ("effects", "reach"):
        if narrowed in data:
            fact[narrowed] = data[narrowed]
    if "agent" in data:
        calls = data["agent"].get("calls") or {}
        fact.update(
            kind="agent",
            tools=calls.get("tools", []),
            skills=calls.get("skills", []),
            operations=calls.get("operations", []),
            ask=data["agent"].get("ask", False),
        )
    elif "ask" in data:
        fact["kind"] = "ask"
    elif "worker" in data:
        fact.update(
            kind="worker",
            tools=data["worker"].get("calls", {}).get("tools", []),
            write=data["worker"].get("write", False),
        )
    if data.get("credential"):
        fact["credential"] = data["credential"]
    url = (data.get("inputs") or {}).get("url")
    if isinstance(url, str) and not url.startswith("$"):
        fact["url"] = url
    return fact


def _findings(name: str, method: Any, steps: list[dict[str, Any]]) -> list[str]:
    out = []
    used = {s.get("name") for s in steps if s.get("kind") == "tool"}
    for s in steps:
        used.update(s.get("tools", []))
    changes = sorted(t for t in used if t in CHANGING_TOOLS)
    if method.effects is None:
        out.append(f"{name}: declares no effects, so the host's authority applies unnarrowed")
    if method.effects == "allow" and changes:
        out.append(f"{name}: effects allow with changing tools {changes}; no person sees them")
    if not changes and method.effects not in ("none", None):
        out.append(f"{name}: calls no changing tool, so effects: none would be enough")
    if method.reach == "inputs":
        out.append(f"{name}: reach inputs lets path inputs name folders outside the workspace")
    for s in steps:
        if s.get("name") == "command.execute" or "command.execute" in s.get("tools", []):
            out.append(f"{name}/{s['id']}: runs commands (command.execute)")
        if s.get("kind") == "agent" and any(t in CHANGING_TOOLS for t in s.get("tools", [])):
            out.append(f"{name}/{s['id']}: an agent may call changing tools")
        if s.get("kind") == "agent" and any(o.endswith("/*") for o in s.get("operations", [])):
            out.append(f"{name}/{s['id']}: an agent may call every operation of a connector")
    return out


def _inspect(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    from proctor.errors import ProctorError
    from proctor.runtime.skills import load_skill

    resolved = ctx.workspace.resolve(args["path"], "list")
    try:
        loaded = load_skill(str(resolved.abs), cwd=resolved.abs, workspace_root=ctx.workspace.root)
    except ProctorError as exc:
        raise ToolFailed(
            f"{resolved.rel} is not a readable skill package ({exc.code})",
            code="package_unreadable",
        ) from exc
    package = loaded.package
    methods: dict[str, Any] = {}
    findings: list[str] = []
    credentials: dict[str, Any] = {}
    if package.profile is not None:
        for mname, method in package.profile.methods.items():
            steps = [_step_facts(step) for step in method.steps]
            methods[mname] = {"effects": method.effects, "reach": method.reach, "steps": steps}
            findings += _findings(mname, method, steps)
        for cname, req in package.profile.credentials.items():
            credentials[cname] = {
                "provider": req.provider,
                "audience": req.audience,
                "delivered_as_env": sorted(a.delivery.env for a in req.auth.values()),
            }
            if req.audience is None:
                findings.append(f"credential {cname}: no audience, so no origin binds it")
    else:
        findings.append("no run.yaml: one agent method from SKILL.md (allowed-tools mapping)")
    return {
        "name": package.name,
        "description": package.description,
        "package_digest": loaded.package_digest,
        "files": list(package.files),
        "connectors": sorted(
            {
                f.split("/")[1]
                for f in package.files
                if f.startswith("connectors/") and f.endswith("/connector.yaml")
            }
        ),
        "methods": methods,
        "credentials": credentials,
        "findings": findings,
    }


SKILLS_INSPECT = Tool(
    name="skills.inspect",
    description=(
        "Read a skill package in the workspace and list what it asks for: effects, reach, tools,"
        " skills, operations, credentials, URLs, with least-privilege findings."
    ),
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["path"],
        "properties": {"path": {"type": "string", "minLength": 1, "maxLength": 1000}},
    },
    effect="read",
    handler=_inspect,
    paths=_path_arg,
    output_schema={"type": "object"},
)


def _log_arg(args: Any) -> list[tuple[str, Access]]:
    path = args.get("path")
    return [(path, "read")] if isinstance(path, str) and path else []


def _summary(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    from proctor.runtime.records.audit import audit_path

    named = args.get("path") or ""
    path = ctx.workspace.resolve(named, "read").abs if named else None
    try:
        raw = (path or audit_path(ctx.workspace.root, os.environ)).read_bytes()
    except FileNotFoundError:
        raw = b""
    except OSError as exc:
        raise ToolFailed(
            "the workspace's audit log cannot be read", code="audit_unreadable"
        ) from exc
    refused: Counter[tuple[str, str, str]] = Counter()
    warned: Counter[tuple[str, str, str]] = Counter()
    examples: list[dict[str, Any]] = []
    lines = raw.splitlines()[-_MAX_LINES:]
    for line in reversed(lines):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        kind = event.get("event")
        key = (str(event.get("tool")), str(event.get("code")), str(event.get("rule_id")))
        if kind == "call_refused":
            refused[key] += 1
        elif kind == "policy_guard_check" and event.get("effect") in ("warned", "refused"):
            (refused if event.get("effect") == "refused" else warned)[key] += 1
        else:
            continue
        if len(examples) < _MAX_EXAMPLES:
            examples.append(
                {
                    "event": kind,
                    "tool": key[0],
                    "code": key[1],
                    "rule_id": event.get("rule_id"),
                    "step": event.get("step"),
                    "timestamp": event.get("timestamp"),
                }
            )

    def rows(counts: Counter[tuple[str, str, str]]) -> list[dict[str, Any]]:
        return [
            {"tool": t, "code": c, "rule_id": None if r == "None" else r, "count": n}
            for (t, c, r), n in counts.most_common()
        ]

    return {
        "lines": len(lines),
        "refused": rows(refused),
        "warned": rows(warned),
        "examples": examples,
    }


AUDIT_SUMMARY = Tool(
    name="audit.summary",
    description=(
        "Count this workspace's audit log refusals and policy warnings by tool, code and rule"
        " (codes only, never messages or arguments)."
    ),
    schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {"path": {"type": "string", "maxLength": 1000}},
    },
    effect="read",
    handler=_summary,
    paths=_log_arg,
    output_schema={"type": "object"},
)

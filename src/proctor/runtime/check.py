"""``proctor check``: self-verification of a workspace and the install.

Three phases, each a list of checks with what they covered:

- ``parse``: every skill package (SKILL.md, run.yaml), every policy file and every directive
  file's frontmatter parses, and every tool a step names (or an agent turn offers) is
  registered, with the nearest names when it is not ("did you mean");
- ``policy``: the profile and drift check, rule/guard binding in both directions, and at least
  one enforceable rule;
- ``tools``: every tool has a JSON Schema that compiles;
- ``records``: the audit log's hash chain holds, and so does every anchor the run receipts
  and the run store committed (``proctor audit verify``); the SQLite run store passes
  ``PRAGMA quick_check`` (a scan of the whole file, made here even where a command would
  skip it because the file is as its last check left it).

A check that examined nothing fails instead of passing (no skill found, no policy loaded, no
tool registered), saying where it looked; a workspace with directives of its own and no skill
package passes the skills check. ``passed`` is true only when every check passed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.contracts.values import dataclass, field
from proctor.errors import ProctorError
from proctor.runtime.boundary.workspace import Workspace

if TYPE_CHECKING:
    from proctor.runtime.engine.session import Session

_SKIP = frozenset({".git", ".proctor", "node_modules", ".venv", "__pycache__", ".peers"})


@dataclass
class Check:
    """One check: its name, whether it passed, what it covered, and its findings."""

    name: str
    passed: bool
    detail: str
    findings: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Phase:
    """A named group of checks."""

    phase: str
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when every check of the phase passed."""
        return all(c.passed for c in self.checks)


def _skill_folders(root: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP)
        if "SKILL.md" in filenames:
            found.append(Path(dirpath))
    return found


_LOOKED = (
    "looked for a SKILL.md in the workspace folder and every folder below it (skipping "
    + ", ".join(sorted(_SKIP))
    + ")"
)


def unknown_tools(label: str, package: Any, tools: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A finding (``tool_unknown``, with the nearest registered names) for every tool a step
    of ``package`` names, or an agent turn's allowance offers, that is not registered."""
    import difflib

    from proctor.contracts.skill import AgentStep, ToolStep

    profile = package.profile
    out: list[dict[str, Any]] = []
    for method_name, method in profile.methods.items() if profile is not None else []:
        for step in method.steps:
            if isinstance(step, ToolStep):
                names = [step.tool]
            elif isinstance(step, AgentStep):
                names = list(step.agent.calls.tools)
            else:
                continue
            for name in names:
                if name in tools:
                    continue
                close = difflib.get_close_matches(name, list(tools), n=3, cutoff=0.6)
                hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
                out.append(
                    {
                        "code": "tool_unknown",
                        "message": f"method {method_name!r} step {step.id!r} names tool"
                        f" {name!r}, which is not registered{hint} (proctor tool list)",
                        "path": f"{label}/run.yaml",
                    }
                )
    return out


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix() or "."
    except ValueError:
        return path.name


def check_workspace(workspace: Workspace, environ: Mapping[str, str]) -> list[Phase]:
    """Run every phase; never raises for what it finds (findings carry the errors)."""
    from proctor.runtime.engine.session import Session

    session = Session(workspace, environ=environ)
    root = workspace.root
    parse, policy, tools = Phase("parse"), Phase("policy"), Phase("tools")

    # parse: skills
    from proctor.runtime.skills import read_package

    skills = _skill_folders(root)
    findings: list[dict[str, Any]] = []
    from proctor.parser.skill import build_package

    packages: list[tuple[str, Any]] = []
    for folder in skills:
        label = _rel(folder, root)
        try:
            files, _ = read_package(folder, label)
            packages.append((label, build_package(label, files)))
        except ProctorError as exc:
            findings.append({"code": exc.code, "message": exc.message, "path": label})
    # parse: directives, through the loader the executor uses (shipped and workspace)
    from proctor.runtime.directives import load_directives

    found = load_directives(root, tools=session.tools)
    own = [d.id for d in found.directives.values() if not d.source.startswith("shipped:")]
    own += list(found.refused)  # the workspace's own too, reported in the directives check
    if skills:
        detail = f"{len(skills)} skill packages examined, {len(findings)} invalid"
    else:
        detail = f"no skill package found: {_LOOKED}"
        if own:
            detail += f"; the workspace has {len(own)} directive(s) of its own, checked below"
        else:
            detail += "; start one with `proctor init`"
    parse.checks.append(
        Check("skills", (bool(skills) or bool(own)) and not findings, detail, findings)
    )
    # parse: connectors (the workspace's and each package's), and the operations steps name
    examined_connectors, cfind = _connector_findings(root, skills, environ)
    if examined_connectors or cfind:
        parse.checks.append(
            Check(
                "connectors",
                not cfind,
                f"{examined_connectors} connectors examined, {len(cfind)} problems",
                cfind,
            )
        )
    unknown = [
        f for label, package in packages for f in unknown_tools(label, package, session.tools)
    ]
    if packages:
        parse.checks.append(
            Check(
                "step tools",
                not unknown,
                f"every tool the steps of {len(packages)} package(s) name is registered"
                if not unknown
                else f"{len(unknown)} tool name(s) in steps are not registered",
                unknown,
            )
        )
    dfind: list[dict[str, Any]] = [
        {"code": exc.code, "message": exc.message, "path": label}
        for label, exc in sorted(found.refused.items())
    ]
    examined = len(found.directives) + len(found.refused)
    parse.checks.append(
        Check(
            "directives",
            examined > 0 and not dfind,
            f"{examined} directives examined, {len(dfind)} invalid",
            dfind,
        )
    )

    # policy
    try:
        policies, registry, unguarded = session.policy()
    except ProctorError as exc:
        policy.checks.append(
            Check("policy_load", False, exc.message, [{"code": exc.code, "message": exc.message}])
        )
    else:
        from proctor.policy import PolicySet, check_bindings

        if isinstance(policies, PolicySet):
            count = len(policies.rules)
            policy.checks.append(
                Check(
                    "policy_load",
                    True,
                    f"{count} rules from {len(policies.policy_ids)} policy files valid",
                )
            )
            bfind = check_bindings(policies, registry)
            errors = [f for f in bfind if f.severity == "error"]
            info = [f.message for f in bfind if f.severity == "info"]
            policy.checks.append(
                Check(
                    "guard_bindings",
                    not errors,
                    info[-1] if info and not errors else f"{len(errors)} binding problems",
                    [
                        {
                            "code": f.code,
                            "message": f.message,
                            "rule_id": f.rule_id,
                            "guard": f.guard,
                        }
                        for f in errors
                    ],
                )
            )
        else:
            policy.checks.append(
                Check(
                    "policy_load",
                    not unguarded,
                    "no enforceable policy rule: the run would go unguarded "
                    "(PROCTOR_ALLOW_NO_POLICIES=1)",
                )
            )
    # tools
    import fastjsonschema

    tfind: list[dict[str, Any]] = []
    all_tools = session.tools
    for name, tool in sorted(all_tools.items()):
        try:
            fastjsonschema.compile(tool.schema)
            if tool.schema.get("type") != "object":
                raise ValueError("the schema's type must be object")
        except Exception as exc:
            tfind.append({"code": "tool_schema_invalid", "message": f"{name}: {exc}"})
    tools.checks.append(
        Check(
            "tool_schemas",
            bool(all_tools) and not tfind,
            f"all {len(all_tools)} tools have schemas"
            if all_tools and not tfind
            else (
                "no tool registered: nothing was examined"
                if not all_tools
                else f"{len(tfind)} tools without a valid schema"
            ),
            tfind,
        )
    )
    session.close()
    records = [_audit_check(workspace, environ), _store_check(session, environ)]
    return [parse, policy, tools, Phase("records", records)]


def _connector_findings(
    root: Path, skills: list[Path], environ: Mapping[str, str]
) -> tuple[int, list[dict[str, Any]]]:
    """Parse every connector manifest; check each operation step names a declared one, and
    each MCP connector's operations a pinned tool of a configured server."""
    from proctor.contracts.skill import AgentStep, OperationStep
    from proctor.parser.skill import build_package
    from proctor.runtime.connectors.catalog import find_connectors
    from proctor.runtime.skills import read_package

    findings: list[dict[str, Any]] = []
    names: set[str] = set()
    loaded: dict[str, Any] = {}
    try:
        found = find_connectors(root)
        names.update(f"{n}:{c.source}" for n, c in found.items())
        loaded.update((c.source, c) for c in found.values())
    except ProctorError as exc:
        findings.append({"code": exc.code, "message": exc.message, "path": "connectors"})
    for folder in skills:
        label = _rel(folder, root)
        try:
            found = find_connectors(root, folder, label)
            names.update(f"{n}:{c.source}" for n, c in found.items())
            loaded.update((c.source, c) for c in found.values())
        except ProctorError as exc:
            findings.append({"code": exc.code, "message": exc.message, "path": label})
            continue
        try:
            package = build_package(label, read_package(folder, label)[0])
        except ProctorError:
            continue  # the package's own problem: the skills check reports it, once
        ops = {f"{n}/{op}" for n, c in found.items() for op in c.connector.operations}
        methods = package.profile.methods if package.profile is not None else {}
        for mname, method in methods.items():
            for step in method.steps:
                wanted = [step.operation] if isinstance(step, OperationStep) else []
                if isinstance(step, AgentStep):
                    wanted = [o for o in step.agent.calls.operations if not o.endswith("/*")]
                findings.extend(
                    {
                        "code": "operation_unknown",
                        "message": f"{label}: method {mname} step {step.id} names operation"
                        f" {op!r}, which no connector declares",
                        "path": label,
                    }
                    for op in wanted
                    if op not in ops
                )
    findings.extend(_mcp_connector_findings(root, list(loaded.values()), environ))
    return len(names), findings


def _mcp_connector_findings(
    root: Path, connectors: list[Any], environ: Mapping[str, str]
) -> list[dict[str, Any]]:
    """For each MCP connector: its server is configured, each operation's tool is pinned, and
    a ``verb: read`` operation calls a read (what a call would refuse, found before one)."""
    wanted = [c for c in connectors if c.connector.mcp is not None]
    if not wanted:
        return []
    from proctor.runtime.gateway.upstreams import Upstreams, load_upstreams

    try:
        config = load_upstreams(root, environ)
    except ProctorError as exc:
        return [{"code": exc.code, "message": exc.message, "path": exc.details.get("file", "")}]
    findings: list[dict[str, Any]] = []
    upstreams = None if config is None else Upstreams(config, Workspace(root), environ)
    try:
        for loaded in wanted:
            server = loaded.connector.mcp
            if upstreams is None or server not in upstreams.config.servers:
                message = f"{loaded.source}: names MCP server {server!r}, which .mcp.json lacks"
                findings.append(
                    {"code": "mcp_server_unknown", "message": message, "path": loaded.source}
                )
                continue
            for name, op in loaded.connector.operations.items():
                try:
                    effect = upstreams.effect_of(server, op.mcp.tool)
                except ProctorError as exc:
                    findings.append(
                        {"code": exc.code, "message": f"{loaded.source}: {name}: {exc.message}",
                         "path": loaded.source}
                    )  # fmt: skip
                    continue
                if op.verb == "read" and effect != "read":
                    message = (
                        f"{loaded.source}: {name} is a read, and upstream tool"
                        f" {server}/{op.mcp.tool} is {effect!r}: declare it a write"
                    )
                    findings.append(
                        {"code": "mcp_effect_weaker", "message": message, "path": loaded.source}
                    )
    finally:
        if upstreams is not None:
            upstreams.close()
    return findings


def _audit_check(workspace: Workspace, environ: Mapping[str, str]) -> Check:
    """The audit log against its anchors; no log and no anchor is a workspace with no runs."""
    from proctor.runtime.records.anchors import workspace_log_check
    from proctor.runtime.records.audit import audit_path

    try:
        check = workspace_log_check(
            audit_path(workspace.root, environ), workspace.state_dir, environ
        )
    except ProctorError as exc:
        return Check("audit_log", False, exc.message, [{"code": exc.code, "message": exc.message}])
    except OSError as exc:
        message = f"the audit log cannot be read: {exc.strerror or exc}"
        return Check(
            "audit_log", False, message, [{"code": "audit_unreadable", "message": message}]
        )
    report = check.report
    if not check.exists and report.anchors == 0:
        return Check("audit_log", True, "no audit log yet: no run has been recorded here")
    if report.ok:
        return Check(
            "audit_log",
            True,
            f"{report.lines} lines chained, {report.anchors} anchors hold",
        )
    code = "store_missing" if report.first_bad_line is None else "audit_chain_broken"
    findings = [
        {"code": code, "message": report.reason, "line": report.first_bad_line, "why": report.code}
    ]
    findings += [
        {"code": f"audit_anchor_{b['problem']}", "message": b["message"], "line": b["line"]}
        for b in report.broken_anchors
        if b["message"] != report.reason
    ]
    at = "" if report.first_bad_line is None else f" at line {report.first_bad_line}"
    return Check("audit_log", False, f"the audit log is broken{at}",
                 findings)  # fmt: skip


def _store_check(session: Session, environ: Mapping[str, str]) -> Check:
    """The SQLite run store scanned whole (a PostgreSQL store is its server's to check)."""
    from proctor.runtime.records.store_evidence import refuse_forgotten_in
    from proctor.runtime.records.store_file import check_now

    if environ.get("PROCTOR_DATABASE_URL"):
        return Check("run_store", True, "the run store is on PostgreSQL: its server checks it")
    path, shown = session.store_file()
    try:
        refuse_forgotten_in(session.workspace.root, session.workspace.state_dir, environ,
                            path, shown)  # fmt: skip
        found = check_now(path, shown)
    except ProctorError as exc:
        return Check("run_store", False, exc.message, [{"code": exc.code, "message": exc.message}])
    if not found:
        return Check("run_store", True, f"no run store yet at {shown}: no run has been recorded")
    return Check("run_store", True, f"{shown} passed PRAGMA quick_check")


def report(phases: list[Phase]) -> dict[str, Any]:
    """The JSON document of ``proctor check --json``."""
    errors = sum(len(c.findings) or (0 if c.passed else 1) for p in phases for c in p.checks)
    return {
        "schema": "proctor.check.v1",
        "passed": all(p.passed for p in phases),
        "error_count": errors,
        "phases": [
            {
                "phase": p.phase,
                "passed": p.passed,
                "checks": [
                    {"name": c.name, "passed": c.passed, "detail": c.detail, "findings": c.findings}
                    for c in p.checks
                ],
            }
            for p in phases
        ],
    }

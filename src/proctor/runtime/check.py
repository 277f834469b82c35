"""``proctor check``: self-verification of a workspace and the install.

Three phases, each a list of checks with what they covered:

- ``parse``: every skill package (SKILL.md, run.yaml), every policy file and every directive
  file's frontmatter parses;
- ``policy``: the profile and drift check, rule/guard binding in both directions, and at least
  one enforceable rule;
- ``tools``: every tool has a JSON Schema that compiles.

A check that examined nothing fails instead of passing (no skill found, no policy loaded, no
tool registered). ``passed`` is true only when every check passed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctor.errors import ProctorError
from proctor.runtime.workspace import Workspace

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


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix() or "."
    except ValueError:
        return path.name


def check_workspace(workspace: Workspace, environ: Mapping[str, str]) -> list[Phase]:
    """Run every phase; never raises for what it finds (findings carry the errors)."""
    from proctor.runtime.driver import Session

    session = Session(workspace, environ=environ)
    root = workspace.root
    parse, policy, tools = Phase("parse"), Phase("policy"), Phase("tools")

    # parse: skills
    from proctor.runtime.skills import read_package

    skills = _skill_folders(root)
    findings: list[dict[str, Any]] = []
    from proctor.parser.skill import build_package

    for folder in skills:
        label = _rel(folder, root)
        try:
            files, _ = read_package(folder, label)
            build_package(label, files)
        except ProctorError as exc:
            findings.append({"code": exc.code, "message": exc.message, "path": label})
    parse.checks.append(
        Check(
            "skills",
            bool(skills) and not findings,
            f"{len(skills)} skill packages examined, {len(findings)} invalid"
            if skills
            else "no skill package found: nothing was examined",
            findings,
        )
    )
    # parse: directives (frontmatter only in this version)
    directives = (
        sorted((root / "directives").glob("*.md")) if (root / "directives").is_dir() else []
    )
    dfind: list[dict[str, Any]] = []
    from proctor.parser.skill import parse_skill_md

    for path in directives:
        try:
            text = path.read_text("utf-8")
            front, _ = _directive_frontmatter(text, f"directives/{path.name}", parse_skill_md)
            if front.get("id") != path.stem:
                dfind.append(
                    {
                        "code": "directive_id_mismatch",
                        "path": f"directives/{path.name}",
                        "message": f"id {front.get('id')!r} disagrees with the file name",
                    }
                )
        except (ProctorError, UnicodeDecodeError, OSError) as exc:
            dfind.append(
                {
                    "code": getattr(exc, "code", "unreadable"),
                    "message": str(exc),
                    "path": f"directives/{path.name}",
                }
            )
    parse.checks.append(
        Check(
            "directives",
            not dfind,
            f"{len(directives)} directive files examined, {len(dfind)} invalid",
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
    return [parse, policy, tools]


def _directive_frontmatter(text: str, source: str, parse: Any) -> tuple[dict[str, Any], str]:
    # Directive frontmatter is the same fenced YAML as SKILL.md's, with other required keys;
    # the full directive loader comes with agent steps.
    from proctor.parser.yaml_strict import load_yaml

    if not text.startswith("---"):
        raise ProctorError(f"{source}: no frontmatter", code="directive_frontmatter")
    end = text.find("\n---", 3)
    if end < 0:
        raise ProctorError(f"{source}: unterminated frontmatter", code="directive_frontmatter")
    data = load_yaml(text[3:end], source=source)
    if not isinstance(data, dict):
        raise ProctorError(f"{source}: frontmatter is not a mapping", code="directive_frontmatter")
    for key in ("id", "description"):
        if not data.get(key):
            raise ProctorError(f"{source}: frontmatter needs {key!r}", code="directive_frontmatter")
    return data, text[end + 4 :]


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

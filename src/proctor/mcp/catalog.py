"""The skills ``proctor mcp`` serves, each method as one MCP tool.

A reference with ``#method`` offers that method alone; a reference without one offers every
method of the package. A tool's name is ``<skill>__<method>`` folded to the characters every
MCP client accepts (``A-Z a-z 0-9 _ -``, at most 64, which is stricter than the protocol's
128 with dots because several hosts refuse more); its description is the method's; its input
schema is the method's ``inputs``. Credential readiness is decided from one workspace
snapshot when the catalog is loaded.

A catalog remembers the digest of every package it was built from; :func:`package_digests`
reads them again (no parsing), so a server rebuilds its catalog when a served package changes
(a method added, renamed or given a new input schema) and never otherwise.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.contracts.skill import Method, OperationStep, ProcessStep, ToolStep
from proctor.contracts.values import dataclass, field
from proctor.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from proctor.runtime.home.credentials import Readiness
    from proctor.runtime.skills import LoadedSkill

__all__ = [
    "TURN_TOOL_NAMES",
    "Catalog",
    "SkillTool",
    "load_catalog",
    "package_digests",
    "tool_name",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_MAX_NAME = 64

# Names the turn tools take; no skill tool may shadow one.
TURN_TOOL_NAMES = frozenset(
    {"turn_list", "turn_status", "turn_read", "turn_call", "turn_complete", "call_cancel"}
)


def tool_name(skill: str, method: str) -> str:
    """The MCP tool name of ``skill#method``: ``<skill>__<method>``, unsafe runs folded to ``_``.

    Raises:
        UsageError: ``mcp_tool_name_invalid`` when nothing usable is left or it is too long.
    """
    name = f"{_UNSAFE.sub('_', skill).strip('_')}__{_UNSAFE.sub('_', method).strip('_')}"
    if name.startswith("__") or name.endswith("__") or len(name) > _MAX_NAME:
        raise UsageError(
            f"skill {skill!r} method {method!r} has no usable MCP tool name (letters, digits,"
            f" '_' and '-', at most {_MAX_NAME} characters)",
            code="mcp_tool_name_invalid",
        )
    return name


@dataclass(frozen=True)
class SkillTool:
    """One method served as a tool.

    Attributes:
        name: the MCP tool name.
        ref: the reference the driver runs (``<package folder>#<method>``).
        skill, method: the package and method names.
        description: what a client shows for the tool.
        input_schema: the method's ``inputs`` JSON Schema, an object schema.
        credentials: readiness of each credential the method's steps use (decided at startup).
        annotations: the MCP hints derived from the method's effects (mcp/annotations.py).
    """

    name: str
    ref: str
    skill: str
    method: str
    description: str
    input_schema: dict[str, Any]
    credentials: tuple[Readiness, ...] = ()
    annotations: dict[str, bool] = field(default_factory=dict)

    @property
    def missing(self) -> list[Readiness]:
        """The credentials that are not ready."""
        return [c for c in self.credentials if not c.ready]


@dataclass(frozen=True)
class Catalog:
    """The served tools, by name, in command-line order, and the digest of each served
    package (in reference order) they were built from."""

    tools: dict[str, SkillTool] = field(default_factory=dict)
    digests: tuple[str, ...] = ()

    def get(self, name: str) -> SkillTool | None:
        """The tool called ``name``, or ``None``."""
        return self.tools.get(name)


def _credentials_of(method: Method) -> set[str]:
    used: set[str] = set()
    for step in method.steps:
        if isinstance(step, ToolStep | OperationStep | ProcessStep) and step.credential is not None:
            used.add(step.credential)
    return used


def _input_schema(method: Method) -> dict[str, Any]:
    schema = dict(method.inputs)
    # MCP requires an object schema at the top level of a tool's input.
    if schema.get("type") != "object":
        raise UsageError(
            "a method served over MCP needs an object inputs schema (type: object)",
            code="mcp_inputs_not_object",
        )
    return schema


def _description(skill: LoadedSkill, method_name: str, method: Method) -> str:
    if method.description:
        return method.description
    return f"{skill.package.description} (method {method_name})"


def package_digests(refs: list[str], *, cwd: Path, workspace_root: Path) -> tuple[str, ...]:
    """The package digest of each reference as its files are now, without parsing them; a
    package that cannot be found or read is ``unreadable:<code>`` (it differs from any digest).
    """
    from proctor.errors import ProctorError
    from proctor.runtime.packages.resolve import is_named_ref, resolve_skill
    from proctor.runtime.skills import locate, read_package

    found = []
    for ref in refs:
        try:
            if is_named_ref(ref):  # a core skill or an installed package: verified again
                found.append(
                    resolve_skill(ref, cwd=cwd, workspace_root=workspace_root).package_digest
                )
                continue
            folder, label, _ = locate(ref, cwd=cwd, workspace_root=workspace_root)
            found.append(read_package(folder, label)[1])
        except ProctorError as exc:
            found.append(f"unreadable:{exc.code}")
        except OSError as exc:  # a file vanished or turned unreadable while it was read
            found.append(f"unreadable:{type(exc).__name__}")
    return tuple(found)


def load_catalog(
    refs: list[str],
    *,
    cwd: Path,
    workspace_root: Path,
    environ: Mapping[str, str] | None = None,
) -> Catalog:
    """Load every referenced skill, and decide credential readiness once from one snapshot.

    Raises:
        UsageError: a reference names no package or an unknown method (``method_unknown``), a
            package has no run.yaml (``no_methods``), two methods fold to one tool name
            (``mcp_tool_name_collision``), or a name is unusable.
        ParseError: a package file is invalid.
    """
    from proctor.mcp.annotations import method_annotations
    from proctor.runtime.home.credentials import readiness, snapshot_environment
    from proctor.runtime.packages.resolve import resolve_skill
    from proctor.runtime.tools.registry import native_tools

    registry = native_tools()

    if not refs:
        raise UsageError("name at least one skill to serve", code="mcp_no_skills")
    snapshot = snapshot_environment(workspace_root, environ)
    tools: dict[str, SkillTool] = {}
    digests: list[str] = []
    for ref in refs:
        skill = resolve_skill(ref, cwd=cwd, workspace_root=workspace_root, environ=environ)
        digests.append(skill.package_digest)
        profile = skill.package.profile
        if profile is None:
            raise UsageError(
                f"skill {skill.package.name} has no run.yaml, so it has no method to serve",
                code="no_methods",
            )
        if skill.method is not None and skill.method not in profile.methods:
            raise UsageError(
                f"skill {skill.package.name} has no method {skill.method!r}; methods: "
                + ", ".join(sorted(profile.methods)),
                code="method_unknown",
            )
        names = [skill.method] if skill.method is not None else sorted(profile.methods)
        ready = {
            r.name: r
            for r in readiness(
                profile.credentials,
                skill=skill.package.name,
                workspace_root=workspace_root,
                env=snapshot,
                identity=skill.identity or None,
            )
        }
        for method_name in names:
            method = profile.methods[method_name]
            name = tool_name(skill.package.name, method_name)
            if name in tools or name in TURN_TOOL_NAMES:
                raise UsageError(
                    f"two served methods share the MCP tool name {name!r}; serve one of them",
                    code="mcp_tool_name_collision",
                )
            tools[name] = SkillTool(
                name=name,
                # a core or installed package is run by its name, so each call verifies it again
                # and its receipt binds it; a local folder by its path
                ref=f"{skill.label if skill.origin else skill.folder}#{method_name}",
                skill=skill.package.name,
                method=method_name,
                description=_description(skill, method_name, method),
                input_schema=_input_schema(method),
                credentials=tuple(ready[c] for c in sorted(_credentials_of(method)) if c in ready),
                annotations=method_annotations(method, registry),
            )
    return Catalog(tools, tuple(digests))

"""Directives: the workspace's ``directives/*.md`` and the shipped ones, loaded, mapped and run.

One loader serves the executor, ``proctor directives catalogue`` and the ``directive.*`` tools,
so the catalogue always lists what a run would load. A workspace directive with the id of a
shipped one replaces it (the catalogue says so).

A directive runs as a skill with one agent method (see :func:`package_for`): its body is the
agent's instructions, the request is its one input, and its allowance is its ``tools`` mapped to
proctor's tools. The reference kernel's tool names map as follows (a directive may also name a
proctor tool directly):

| reference            | proctor tool          | behaviour kept                                  |
| -------------------- | --------------------- | ----------------------------------------------- |
| `read_file`          | `fs.read`             | workspace only; sensitive files refused         |
| `write_file`         | `fs.write`            | only under `output/` and `drafts/`              |
| `list_dir`           | `fs.list`             | sensitive entries withheld                      |
| `delete_file`        | `fs.delete`           | only under `output/` and `drafts/`; to trash    |
| `restore_file`       | `fs.restore`          | from the trash                                  |
| `http_request`       | `http.request`        | through the egress guard                        |
| `echo`               | `echo`                |                                                 |
| `list_tools`         | `tool.list`           |                                                 |
| `list_directives`    | `directive.list`      |                                                 |
| `validate_directive` | `directive.validate`  |                                                 |
| `resolve_secret`     | `credential.resolve`  | says whether it resolves; never the value       |

``directives/`` and ``policies/`` are authority files: no run writes them, whatever its tools.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.contracts.values import dataclass, field
from proctor.errors import ParseError, UsageError

if TYPE_CHECKING:
    from proctor.parser.directive import Directive

__all__ = [
    "DIRECTIVE_OUTPUT",
    "DIRECTIVE_TOOLS",
    "WRITABLE_DIRS",
    "DirectiveSet",
    "allowance_for",
    "confined_run",
    "is_directive_run",
    "load_directives",
    "package_for",
    "read_directive",
    "render_catalogue",
]

DIRECTIVE_TOOLS: dict[str, str] = {
    "read_file": "fs.read",
    "write_file": "fs.write",
    "list_dir": "fs.list",
    "delete_file": "fs.delete",
    "restore_file": "fs.restore",
    "http_request": "http.request",
    "echo": "echo",
    "list_tools": "tool.list",
    "list_directives": "directive.list",
    "validate_directive": "directive.validate",
    "resolve_secret": "credential.resolve",
}
"""Reference tool name -> the proctor tool a directive naming it is allowed."""

WRITABLE_DIRS: tuple[str, ...] = ("output", "drafts")
"""Where a directive run may write or delete files (top-level workspace folders)."""

DIRECTIVE_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"done": {"type": "boolean"}, "summary": {"type": "string"}},
    "required": ["summary"],
}
"""What a directive turn returns: ``{"done": true, "summary": "..."}``."""

_MAX_BYTES = 256 * 1024


@dataclass
class DirectiveSet:
    """The directives a workspace can run, and the files that were refused.

    Attributes:
        directives: by id, workspace ones over shipped ones.
        refused: ``{file label: ParseError}`` for every file that was refused.
        replaced: ids of shipped directives a workspace file replaces.
    """

    directives: dict[str, Directive] = field(default_factory=dict)
    refused: dict[str, ParseError] = field(default_factory=dict)
    replaced: list[str] = field(default_factory=list)

    def get(self, directive_id: str) -> Directive:
        """The directive ``directive_id``.

        Raises:
            ParseError: its file was refused (the refusal itself).
            UsageError: (``directive_not_found``) no directive has that id, or the id is not
                a directive id.
        """
        from proctor.parser.directive import DIRECTIVE_ID

        if not DIRECTIVE_ID.match(directive_id):
            raise UsageError(
                "a directive id is letters, digits, '_', '.' or '-'", code="directive_not_found"
            )
        found = self.directives.get(directive_id)
        if found is not None:
            return found
        for label, error in self.refused.items():
            if Path(label).stem == directive_id:
                raise error
        known = ", ".join(sorted(self.directives)) or "(none)"
        raise UsageError(
            f"no directive {directive_id!r}; known: {known}", code="directive_not_found"
        )

    def listed(self, category: str | None = None) -> list[Directive]:
        """The directives sorted by id, optionally of one category."""
        return [
            d
            for _, d in sorted(self.directives.items())
            if category is None or d.category == category
        ]


def _shipped_folder() -> Any:
    from importlib.resources import files

    return files("proctor").joinpath("resources", "directives")


def read_directive(path: Path, *, tools: Collection[str] | None = None) -> Directive:
    """Read and check one directive file named on a command line, named in errors as given.

    Raises:
        UsageError: ``directive_unreadable`` when the file cannot be opened or read (missing, a
            folder, no permission); ParseError: ``directive_too_large`` (over 256 KiB, read no
            further), or the file is not a directive (see
            :func:`proctor.parser.directive.parse_directive`).
    """
    label = str(path)
    try:
        return _read(path, label, path.stem, tools)
    except OSError as exc:
        raise UsageError(
            f"cannot read {label!r}: {exc.strerror or exc}", code="directive_unreadable"
        ) from exc


def _read(path: Any, label: str, stem: str, tools: Collection[str] | None) -> Directive:
    with path.open("rb") as handle:  # never more than the cap: the file may be a device
        data = handle.read(_MAX_BYTES + 1)
    if len(data) > _MAX_BYTES:
        raise ParseError(
            "directive file is larger than 256 KiB", file=label, code="directive_too_large"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(
            "directive file is not UTF-8", file=label, code="directive_frontmatter"
        ) from exc
    from proctor.parser.directive import parse_directive

    directive = parse_directive(text, file_stem=stem, source=label)
    if tools is not None:
        allowance_for(directive, tools)
    return directive


def load_directives(
    workspace_root: Path | None,
    *,
    shipped: bool = True,
    tools: Collection[str] | None = None,
) -> DirectiveSet:
    """Load the shipped directives and the workspace's ``directives/*.md``.

    A file that is refused is kept in :attr:`DirectiveSet.refused` under its label, so one bad
    file never hides the others and is never run.

    Args:
        workspace_root: the workspace (``None``: shipped directives only).
        shipped: include the shipped directives.
        tools: registered tool names; when given, a directive naming an unknown tool is refused
            (``directive_tool_unknown``).
    """
    out = DirectiveSet()
    shipped_ids: set[str] = set()
    if shipped:
        for path in sorted(_shipped_folder().iterdir(), key=lambda p: p.name):
            if not path.name.endswith(".md"):
                continue
            label = f"shipped:{path.name}"
            try:
                directive = _read(path, label, path.name[:-3], tools)
            except ParseError as exc:
                out.refused[label] = exc
                continue
            out.directives[directive.id] = directive
            shipped_ids.add(directive.id)
    if workspace_root is not None:
        folder = workspace_root / "directives"
        if folder.is_dir() and not folder.is_symlink():
            for path in sorted(folder.glob("*.md")):
                label = f"directives/{path.name}"
                if path.is_symlink() or not path.is_file():
                    out.refused[label] = ParseError(
                        "a directive must be a regular file (not a link)",
                        file=label,
                        code="directive_not_regular",
                    )
                    continue
                try:
                    directive = _read(path, label, path.stem, tools)
                except ParseError as exc:
                    out.refused[label] = exc
                    out.directives.pop(path.stem, None)
                    continue
                if directive.id in shipped_ids:
                    out.replaced.append(directive.id)
                out.directives[directive.id] = directive
    return out


def allowance_for(directive: Directive, tools: Collection[str]) -> tuple[str, ...]:
    """The proctor tools a directive may call: its ``tools``, reference names mapped.

    Raises:
        ParseError: (``directive_tool_unknown``) a name is neither a reference tool name nor a
            registered proctor tool.
    """
    out: dict[str, None] = {}
    for name in directive.tools:
        mapped = DIRECTIVE_TOOLS.get(name, name)
        if mapped not in tools:
            raise ParseError(
                f"directive {directive.id!r} names tool {name!r}, which is neither a reference"
                " tool name nor a registered proctor tool",
                file=directive.source,
                code="directive_tool_unknown",
            )
        out.setdefault(mapped, None)
    return tuple(out)


def confined_run(data: Mapping[str, Any], state_dir: Path) -> bool:
    """Whether a run's file changes are confined to ``output/`` and ``drafts/``.

    Confinement is a property of the run, recorded when it starts (``writable_dirs``), so any
    session that resumes it (plain ``proctor resume``, ``Session.turn_call``, MCP) applies it
    again. A run whose package is a directive's generated package is confined even when its
    record predates that field (fail closed).
    """
    if data.get("writable_dirs"):
        return True
    return is_directive_run(data, state_dir)


def is_directive_run(data: Mapping[str, Any], state_dir: Path) -> bool:
    """Whether a run is a directive's: its package is one :func:`package_for` wrote.

    A host working such a run's turn (MCP ``turn_call``) may name the reference kernel's tools
    (``read_file`` ...), as the model of a managed directive turn does.
    """
    folder = data.get("package_folder")
    if not isinstance(folder, str):
        return False
    named = f"{state_dir}/directive-packages"  # by its text: asked of every run
    if not _there(named) and os.path.isdir(folder):
        return False  # no folder that is there lies in one that is not (most workspaces)
    # real paths as text: what Path.resolve() answers, without its path objects and stat
    packages = os.path.realpath(named)
    real = os.path.realpath(folder)
    return real == packages or real.startswith(packages.rstrip("/") + "/")


def _there(path: str) -> bool:
    """``os.path.exists(path)``, asked with ``access`` (``F_OK``: the same lookup, links
    followed): a name usually absent costs no ``FileNotFoundError`` raised and caught."""
    try:
        return os.access(path, os.F_OK)
    except ValueError:  # a NUL in the name: exists says False
        return False


def package_for(directive: Directive, state_dir: Path, tools: Collection[str]) -> Path:
    """Write the skill package a directive runs as, under ``.proctor/directive-packages/``.

    The package is a function of the directive's text alone (same directive, same package
    digest), so a paused directive run resumes against the package it started with, and an
    edited directive is seen as a changed package.

    Raises:
        ParseError: the directive names an unknown tool.
    """
    from proctor.parser.yaml_strict import load_yaml

    allowance = allowance_for(directive, tools)
    folder = state_dir / "directive-packages" / directive.id
    folder.mkdir(parents=True, exist_ok=True)
    skill_md = (
        "---\n"
        f"name: {json.dumps('directive-' + directive.id)}\n"
        f"description: {json.dumps(directive.description)}\n"
        "---\n" + directive.body
    )
    step = {
        "id": "work",
        "agent": {
            "instructions": (
                "Carry out the request in `request` by following the directive above. Use only"
                " the tools offered to you."
            ),
            "inputs": {"request": "$input.request"},
            "calls": {"tools": list(allowance)},
            "output": DIRECTIVE_OUTPUT,
        },
    }
    profile = {
        "minimum_proctor": "0.1.0",
        "default_method": "run",
        "methods": {
            "run": {
                "description": directive.description,
                "inputs": {
                    "type": "object",
                    "properties": {"request": {"type": "string", "minLength": 1}},
                    "required": ["request"],
                    "additionalProperties": False,
                },
                "steps": [step],
            }
        },
    }
    run_yaml = json.dumps(profile, indent=2, sort_keys=True) + "\n"
    load_yaml(run_yaml, source="run.yaml")  # JSON is YAML; proves the strict loader reads it
    _write_if_changed(folder / "SKILL.md", skill_md)
    _write_if_changed(folder / "run.yaml", run_yaml)
    return folder


def _write_if_changed(path: Path, text: str) -> None:
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def render_catalogue(found: DirectiveSet, tool_description: Callable[[str], str]) -> str:
    """``docs/DIRECTIVES.md``: every directive with its category, description and tools.

    ``tool_description`` names what a proctor tool is (for the tools column).
    """
    lines = [
        "# Directives",
        "",
        "Generated by `proctor directives catalogue` from the shipped directives (the same",
        "loader runs them); `proctor directives catalogue --check` fails when this file is stale.",
        "A directive's tools are shown as its file names them, with the proctor tool each maps to.",
        "",
    ]
    from proctor.parser.directive import CATEGORIES

    for category in CATEGORIES:
        members = found.listed(category)
        if not members:
            continue
        lines += [f"## {category}", ""]
        for directive in members:
            lines += [f"### `{directive.id}`", "", directive.description, ""]
            if not directive.tools:
                lines += ["Tools: none (the directive can call nothing).", ""]
                continue
            lines.append("| tool | proctor tool | what it does |")
            lines.append("| --- | --- | --- |")
            for name in directive.tools:
                mapped = DIRECTIVE_TOOLS.get(name, name)
                lines.append(f"| `{name}` | `{mapped}` | {tool_description(mapped)} |")
            lines.append("")
    if found.refused:
        lines += ["## Refused files", ""]
        for label, error in sorted(found.refused.items()):
            lines.append(f"- `{label}`: {error.code}")
        lines.append("")
    return "\n".join(lines)

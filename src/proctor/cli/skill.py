"""``proctor skill inspect`` (what a skill offers and whether its credentials are ready) and
``proctor skill list`` (core, workspace and installed skills)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click


@click.group("skill")
def skill() -> None:
    """List and inspect skill packages.

    \b
    Example:
      proctor skill list
      proctor skill inspect examples/hello-world
    """


def inspect_document(ref: str, *, cwd: Path, profile: str | None = None) -> dict[str, Any]:
    """The ``skill inspect`` document: methods, credential requirements and their readiness.

    Readiness reads no material: it names the source and profile that would be used, or the
    setup commands.

    Raises:
        UsageError: the reference names no package. ParseError: a package file is invalid.
        CredentialError / ConfigError: the home's credential configuration cannot be read.
    """
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.home.credentials import readiness, snapshot_environment
    from proctor.runtime.packages.resolve import resolve_skill

    root = Workspace.discover(cwd).root
    loaded = resolve_skill(ref, cwd=cwd, workspace_root=root)
    package = loaded.package
    methods: dict[str, Any] = {}
    credentials: list[dict[str, Any]] = []
    if package.profile is not None:
        for name, method in package.profile.methods.items():
            methods[name] = {
                "description": method.description,
                "inputs": method.inputs,
                "steps": [step.id for step in method.steps],
                "credentials": sorted(
                    {c for step in method.steps if (c := getattr(step, "credential", None))}
                ),
            }
        ready = readiness(
            package.profile.credentials,
            skill=package.name,
            workspace_root=root,
            env=snapshot_environment(root),
            profile=profile,
            identity=loaded.identity or None,
        )
        credentials = [entry.to_dict() for entry in ready]
    return {
        "name": package.name,
        "description": package.description,
        "package": loaded.label,
        "package_digest": loaded.package_digest,
        "identity": loaded.identity or None,
        "default_method": None if package.profile is None else package.profile.default_method,
        "methods": methods,
        "credentials": credentials,
        "ready": all(entry["ready"] for entry in credentials),
    }


@skill.command("inspect")
@click.argument("ref")
@click.option("--profile", metavar="NAME", help="Show readiness as if run with --profile NAME.")
@click.option("--json", "as_json", is_flag=True, help="Print the document as JSON.")
def inspect(ref: str, profile: str | None, as_json: bool) -> None:
    """Show REF's methods, input schemas and credential readiness (never material).

    \b
    Example:
      proctor skill inspect examples/hello-world --json
    """
    from proctor.cli.render import dump_json

    doc = inspect_document(ref, cwd=Path.cwd(), profile=profile)
    if as_json:
        dump_json(doc, schema="proctor.skill_inspect.v1")
        return
    _render(doc)


def _render(doc: dict[str, Any]) -> None:
    from rich.console import Console

    from proctor.cli.paint import markup as escape

    out = Console(highlight=False, emoji=False, soft_wrap=True)
    out.print(f"[bold]{escape(doc['name'])}[/]  {escape(doc['package'])}")
    out.print(escape(doc["description"]))
    for name, method in doc["methods"].items():
        mark = " (default)" if name == doc["default_method"] else ""
        out.print(f"\nmethod [bold]{escape(name)}[/]{mark}: {escape(method['description'] or '')}")
        out.print("  inputs: " + escape(json.dumps(method["inputs"], sort_keys=True)))
        if method["credentials"]:
            out.print("  credentials: " + escape(", ".join(method["credentials"])))
    for entry in doc["credentials"]:
        modes = ", ".join(f"{mode} (env {env})" for mode, env in entry["modes"].items())
        audience = f", audience {entry['audience']}" if entry["audience"] else ""
        out.print(
            f"\ncredential [bold]{escape(entry['credential'])}[/]: provider "
            f"{escape(entry['provider'])}{escape(audience)}; modes: {escape(modes)}"
        )
        if entry["ready"]:
            via = f" profile {entry['profile']}" if entry["profile"] else ""
            out.print(
                f"  [green]ready[/] from {escape(str(entry['source']))}{escape(via)}"
                f" (mode {escape(str(entry['mode']))})"
            )
        else:
            problem = escape(f"[{entry['problem']}]")
            out.print(f"  [red]not ready[/] {problem}; set it up with:")
            for command in entry["setup"]:
                out.print("    " + escape(command))


def list_document(cwd: Path) -> dict[str, Any]:
    """The ``skill list`` document: core skills, the workspace's ``skills/`` catalog, and
    packages installed from a registry (names only; nothing is verified or run).

    Raises:
        ConfigError: the home cannot be found.
    """
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.packages.core import CORE_NAMESPACE, core_skill_names, shipped_folder
    from proctor.runtime.packages.installed import ADDED_SKILLS

    root = Workspace.discover(cwd).root
    entries: list[dict[str, Any]] = []
    for short in core_skill_names():
        entries.append(
            {
                "ref": f"{CORE_NAMESPACE}/{short}",
                "source": "core",
                "description": _description(shipped_folder(short)),
            }
        )
    catalog = root / "skills"
    if catalog.is_dir():
        for folder in sorted(p for p in catalog.iterdir() if (p / "SKILL.md").is_file()):
            entries.append(
                {"ref": folder.name, "source": "workspace", "description": _description(folder)}
            )
    added = root / ADDED_SKILLS
    for version in sorted(added.glob("*/*/*")) if added.is_dir() else []:
        if version.is_dir() and (version / "SKILL.md").is_file() and version.parts[-3] != "proctor":
            entries.append(
                {
                    "ref": f"{version.parts[-3]}/{version.parts[-2]}@{version.name}",
                    "source": "installed",
                    "description": _description(version),
                }
            )
    return {"skills": entries}


def _description(folder: Path) -> str:
    from proctor.errors import ProctorError
    from proctor.parser.skill import parse_skill_md

    try:
        front, _ = parse_skill_md((folder / "SKILL.md").read_text("utf-8"), folder.name)
    except (OSError, UnicodeDecodeError, ProctorError):
        return "(SKILL.md unreadable)"
    return str(front.get("description") or "")


@skill.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a proctor.skill_list.v1 document.")
def list_skills(as_json: bool) -> None:
    """List the skills you can run here: proctor's core skills (proctor/<name>), the
    workspace's skills/ catalog, and packages installed from a registry.

    \b
    Example:
      proctor skill list
    """
    from proctor.cli.render import dump_json

    doc = list_document(Path.cwd())
    if as_json:
        dump_json(doc, schema="proctor.skill_list.v1")
        return
    from rich.console import Console

    from proctor.cli.paint import markup as escape

    out = Console(highlight=False, emoji=False, soft_wrap=True)
    for entry in doc["skills"]:
        out.print(
            f"[bold]{escape(entry['ref'])}[/]  [dim]{escape(entry['source'])}[/]  "
            f"{escape(entry['description'])}"
        )

"""``proctor skill inspect``: what a skill offers and whether its credentials are ready."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click


@click.group("skill")
def skill() -> None:
    """Inspect skill packages.

    \b
    Example:
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
        )
        credentials = [entry.to_dict() for entry in ready]
    return {
        "name": package.name,
        "description": package.description,
        "package": loaded.label,
        "package_digest": loaded.package_digest,
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
    from rich.markup import escape

    out = Console(highlight=False, soft_wrap=True)
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

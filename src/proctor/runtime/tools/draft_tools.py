"""Deterministic checks of drafts a model wrote: ``skills.check_draft``, ``policy.check_draft``.

Neither tool writes anything (effect ``none``); each refuses a draft that does not pass
(``draft_invalid``, with the parser's message), so the step after it, which offers the draft to a
person, never sees one.

``skills.check_draft`` parses ``SKILL.md`` and ``run.yaml`` with the strict parser, requires the
frontmatter name to be the one asked for, every method to declare its ``effects``, every tool
step to name a native tool, at least one test, and every test to parse and name a method of the
draft. It returns the files as ``fs.apply_bundle`` changes under ``drafts/<name>/``, with
``SKILL.md`` and ``run.yaml`` written as ``SKILL.md.draft`` and ``run.yaml.draft``: those two
names grant authority and no run ever writes them, so making the draft a package is a person's
rename. It does not run the drafted tests (a run cannot start ``proctor test``).

``policy.check_draft`` loads a policy file with the real loader (known guards, known tools,
enforcement and on_error values) and refuses a policy id or rule id in the shipped ``proctor.``
namespace, so a draft can never replace the shipped rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from proctor.contracts.values import replace
from proctor.errors import ProctorError, ToolFailed
from proctor.runtime.tools.base import Tool, ToolContext

__all__ = ["draft_tools"]

Catalogue = Callable[[], Mapping[str, Tool]]
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")


def _bad(message: str) -> ToolFailed:
    return ToolFailed(message, code="draft_invalid")


def _check_skill(catalogue: Catalogue, _ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    from proctor.parser.skill import build_package
    from proctor.parser.testfile import parse_test_file

    name = args["name"]
    if not _NAME.match(name):
        raise _bad(f"{name!r} is not a package name (a-z, 0-9 and '-')")
    files = {"SKILL.md": args["skill_md"], "run.yaml": args["run_yaml"]}
    try:
        package = build_package(name, files)
    except ProctorError as exc:
        raise _bad(f"the draft does not parse: {exc.message}") from exc
    if package.name != name or package.profile is None:
        raise _bad(f"SKILL.md must name the package {name!r} and the draft needs a run.yaml")
    known = catalogue()
    for mname, method in package.profile.methods.items():
        if method.effects is None:
            raise _bad(f"method {mname} declares no effects; say none, ask or allow")
        for step in method.steps:
            tool = getattr(step, "tool", None)
            if tool is not None and tool not in known:
                raise _bad(f"step {mname}/{step.id} names no native tool {tool!r}")
            if getattr(step, "operation", None) is not None:
                raise _bad(f"step {mname}/{step.id}: drafts cannot declare connectors")
    tests = args["tests"]
    if not tests:
        raise _bad("the draft has no tests; write at least one tests/<name>.yaml")
    for tname, text in sorted(tests.items()):
        if not _NAME.match(tname):
            raise _bad(f"test name {tname!r} must use a-z, 0-9 and '-'")
        try:
            test = parse_test_file(text, f"tests/{tname}.yaml")
        except ProctorError as exc:
            raise _bad(f"test {tname} does not parse: {exc.message}") from exc
        target = test.method or package.profile.default_method
        if target is None and len(package.profile.methods) == 1:
            target = next(iter(package.profile.methods))
        if target not in package.profile.methods:
            raise _bad(f"test {tname} names no method of the draft ({test.method!r})")
    base = f"drafts/{name}"
    changes = [
        {"op": "create", "path": f"{base}/SKILL.md.draft", "content": args["skill_md"]},
        {"op": "create", "path": f"{base}/run.yaml.draft", "content": args["run_yaml"]},
    ] + [
        {"op": "create", "path": f"{base}/tests/{tname}.yaml", "content": text}
        for tname, text in sorted(tests.items())
    ]
    return {
        "ok": True,
        "name": name,
        "methods": sorted(package.profile.methods),
        "tests": sorted(tests),
        "changes": changes,
        "next": [
            f"mv {base}/SKILL.md.draft {base}/SKILL.md",
            f"mv {base}/run.yaml.draft {base}/run.yaml",
            f"proctor test {base}",
        ],
    }


def _check_policy(catalogue: Catalogue, _ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    from proctor.policy.loader import PolicySource, load_policy_sources
    from proctor.policy.registry import default_registry

    text = args["rules_yaml"]
    try:
        loaded = load_policy_sources(
            [PolicySource("draft.yaml", text)], default_registry(), catalogue()
        )
    except ProctorError as exc:
        raise _bad(f"the drafted policy does not load: {exc.message}") from exc
    if not loaded.rules:
        raise _bad("the drafted policy has no rules")
    shipped = [pid for pid in loaded.policy_ids if pid.startswith("proctor.")]
    shipped += [r.id for r in loaded.rules if r.id.startswith("proctor.")]
    if shipped:
        raise _bad(f"{shipped[0]} is in the shipped proctor. namespace; name it for this workspace")
    return {
        "ok": True,
        "policy_ids": list(loaded.policy_ids),
        "rules": [
            {
                "id": r.id,
                "guard": r.guard,
                "enforcement": r.enforcement,
                "tools": None if r.tools is None else list(r.tools),
            }
            for r in loaded.rules
        ],
        "rules_yaml": text,
    }


_TEXT = {"type": "string", "minLength": 1, "maxLength": 200_000}

_SKILL_DRAFT = Tool(
    name="skills.check_draft",
    description=(
        "Check a drafted skill package (SKILL.md, run.yaml, tests) with the strict parser and"
        " return it as fs.apply_bundle changes under drafts/<name>/; refuses a draft that fails."
    ),
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "skill_md", "run_yaml", "tests"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 64},
            "skill_md": _TEXT,
            "run_yaml": _TEXT,
            "tests": {"type": "object", "maxProperties": 20, "additionalProperties": _TEXT},
        },
    },
    effect="none",
    handler=lambda _ctx, _args: {},
    output_schema={"type": "object"},
)

_POLICY_DRAFT = Tool(
    name="policy.check_draft",
    description=(
        "Load a drafted policy file with the real loader (known guards and tools) and refuse it"
        " if it fails or claims the shipped proctor. namespace; writes nothing."
    ),
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["rules_yaml"],
        "properties": {"rules_yaml": _TEXT},
    },
    effect="none",
    handler=lambda _ctx, _args: {},
    output_schema={"type": "object"},
)


def draft_tools(catalogue: Catalogue) -> tuple[Tool, ...]:
    """The tools of this module, for the registry; ``catalogue`` answers every native tool by
    name (the registry's own), which the checks need to know which tools exist."""
    return (
        replace(_SKILL_DRAFT, handler=partial(_check_skill, catalogue)),
        replace(_POLICY_DRAFT, handler=partial(_check_policy, catalogue)),
    )

"""Print the cost of Cedar rules in the policy step: median and p95 microseconds per call.

The same three rules (a permit, a forbid, a permit) written in YAML (Python guards) and in
Cedar, evaluated for one fs.write under notes/ that every rule applies to (two allowing
verdicts recorded, the forbid silent). Yardstick: the YAML set, the ratio is Cedar over YAML
in the same run. Needs the ``cedar`` extra.

Run: .venv/bin/python bench/cedar.py
"""

from __future__ import annotations

from _timing import measure
from proctor.policy import GuardContext, GuardRegistry, GuardVerdict, evaluate
from proctor.policy.loader import PolicySource, load_policy_sources
from proctor.runtime.tools.registry import native_tools

YAML = """id: house
rules:
  - {id: editor_change, description: d, guard: b_editor, enforcement: warn, tools: [fs.write]}
  - {id: no_secrets, description: d, guard: b_secrets, enforcement: block, tools: [fs.write]}
  - {id: notes_ok, description: d, guard: b_notes, enforcement: warn, tools: [fs.write]}
"""

CEDAR = """@id("editor_change")
permit(principal == Proctor::Skill::"editor", action == Proctor::Action::"fs.write", resource);
@id("no_secrets")
forbid(principal, action == Proctor::Action::"fs.write", resource)
when { context.resource like "secrets/*" };
@id("notes_ok")
permit(principal, action == Proctor::Action::"fs.write", resource)
when { context.resource like "notes/*" };
"""


def _registry() -> GuardRegistry:
    registry = GuardRegistry()
    registry.register(
        "b_editor",
        lambda c: GuardVerdict(True, "ok", "e") if c.directive_id == "editor" else None,
    )
    registry.register(
        "b_secrets",
        lambda c: (
            GuardVerdict(False, "no", "s")
            if c.workspace_relpaths[0].startswith("secrets/")
            else None
        ),
    )
    registry.register(
        "b_notes",
        lambda c: (
            GuardVerdict(True, "ok", "n") if c.workspace_relpaths[0].startswith("notes/") else None
        ),
    )
    return registry


def main() -> None:
    tools = native_tools()
    registry, empty = _registry(), GuardRegistry()
    as_yaml = load_policy_sources([PolicySource("policies/h.yaml", YAML)], registry, tools)
    as_cedar = load_policy_sources([PolicySource("policies/h.cedar", CEDAR)], empty, tools)
    args = {"path": "notes/today.md", "content": "hello", "create": True}
    ctx = GuardContext("fs.write", args, args, "", "editor", (), ("notes/today.md",))
    assert [o.rule.id for o in evaluate(as_cedar, ctx, empty).verdicts] == [
        o.rule.id for o in evaluate(as_yaml, ctx, registry).verdicts
    ]
    yaml = measure(
        "policy step, 3 YAML rules (yardstick)", lambda: evaluate(as_yaml, ctx, registry)
    )
    cedar = measure(
        "policy step, the same 3 rules in Cedar", lambda: evaluate(as_cedar, ctx, empty)
    )
    print(f"ratio Cedar / YAML: {cedar / yaml:.1f}x  (per Cedar policy: {cedar / 3:.1f} us)")


if __name__ == "__main__":
    main()

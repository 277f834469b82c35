"""Cedar rules (``policies/*.cedar``): equivalent YAML and Cedar rules decide the same on a
corpus of calls; a Cedar refusal names its policy id; bad Cedar files are refused at load;
the generated schema validates the policies."""

from __future__ import annotations

from typing import Any

import cedarpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.errors import PolicyLoadError, RefusedCall
from proctor.policy import GuardContext, GuardRegistry, GuardVerdict, evaluate
from proctor.policy.cedar import cedar_schema
from proctor.policy.loader import PolicySource, load_policy_sources
from proctor.runtime.tools.registry import native_tools

TOOLS = native_tools()

YAML = """id: house
rules:
  - id: editor_change
    description: The editor's writes and deletes are recorded as allowed.
    guard: t_editor
    enforcement: warn
    tools: [fs.write, fs.delete]
  - id: no_writes_in_secrets
    description: Nothing under secrets/ is written.
    guard: t_secret_folder
    enforcement: block
    tools: [fs.write, fs.edit]
  - id: no_evil_urls
    description: No request to a URL naming evil.
    guard: t_evil_url
    enforcement: block
    tools: [http.request]
  - id: todo_left
    description: Content with TODO is written with a warning.
    guard: t_todo
    enforcement: warn
    tools: [fs.write]
  - id: janitor_no_delete
    description: The janitor skill deletes nothing.
    guard: t_janitor
    enforcement: block
    tools: [fs.delete]
  - id: notes_ok
    description: A write under notes/ is recorded as allowed.
    guard: t_notes
    enforcement: warn
    tools: [fs.write]
  - id: content_checked
    description: Content "hi" is recorded as allowed; a call with no content fails open.
    guard: t_content
    enforcement: warn
    on_error: fail_open
    tools: [fs.write, fs.delete]
"""

CEDAR = """@id("editor_change")
@code("editor_change")
permit(principal == Proctor::Skill::"editor",
       action in [Proctor::Action::"fs.write", Proctor::Action::"fs.delete"], resource);

@id("no_writes_in_secrets")
@code("secret_folder")
forbid(principal, action in [Proctor::Action::"fs.write", Proctor::Action::"fs.edit"], resource)
when { context.resource like "secrets/*" };

@id("no_evil_urls")
@code("evil_url")
forbid(principal, action == Proctor::Action::"http.request", resource)
when { context.args has url && context.args.url like "*evil*" };

@id("todo_left")
@code("todo_left")
@enforcement("warn")
forbid(principal, action == Proctor::Action::"fs.write", resource)
when { context.args has content && context.args.content like "*TODO*" };

@id("janitor_no_delete")
@code("janitor_no_delete")
forbid(principal == Proctor::Skill::"janitor", action == Proctor::Action::"fs.delete", resource);

@id("notes_ok")
@code("notes_ok")
permit(principal, action == Proctor::Action::"fs.write", resource)
when { context.resource like "notes/*" };

@id("content_checked")
@code("content_hi")
@on_error("fail_open")
permit(principal, action in [Proctor::Action::"fs.write", Proctor::Action::"fs.delete"], resource)
when { context.args.content like "hi" };
"""


def _registry() -> GuardRegistry:
    registry = GuardRegistry()

    def secret_folder(ctx: GuardContext) -> GuardVerdict | None:
        hit = ctx.workspace_relpaths and ctx.workspace_relpaths[0].startswith("secrets/")
        return GuardVerdict(False, "no", "secret_folder") if hit else None

    def evil_url(ctx: GuardContext) -> GuardVerdict | None:
        hit = "evil" in str(ctx.args.get("url", ""))
        return GuardVerdict(False, "no", "evil_url") if hit else None

    def todo(ctx: GuardContext) -> GuardVerdict | None:
        hit = "TODO" in str(ctx.args.get("content", ""))
        return GuardVerdict(False, "no", "todo_left") if hit else None

    def janitor(ctx: GuardContext) -> GuardVerdict | None:
        return (
            GuardVerdict(False, "no", "janitor_no_delete")
            if ctx.directive_id == "janitor"
            else None
        )

    def editor(ctx: GuardContext) -> GuardVerdict | None:
        return GuardVerdict(True, "ok", "editor_change") if ctx.directive_id == "editor" else None

    def notes(ctx: GuardContext) -> GuardVerdict | None:
        hit = ctx.workspace_relpaths and ctx.workspace_relpaths[0].startswith("notes/")
        return GuardVerdict(True, "ok", "notes_ok") if hit else None

    def content(ctx: GuardContext) -> GuardVerdict | None:
        text = ctx.args["content"]  # KeyError without content: the guard fails, like Cedar
        return GuardVerdict(True, "ok", "content_hi") if text == "hi" else None

    for name, fn in [
        ("t_editor", editor),
        ("t_notes", notes),
        ("t_content", content),
        ("t_secret_folder", secret_folder),
        ("t_evil_url", evil_url),
        ("t_todo", todo),
        ("t_janitor", janitor),
    ]:
        registry.register(name, fn)
    return registry


REGISTRY = _registry()
AS_YAML = load_policy_sources([PolicySource("policies/house.yaml", YAML)], REGISTRY, TOOLS)
AS_CEDAR = load_policy_sources(
    [PolicySource("policies/house.cedar", CEDAR)], GuardRegistry(), TOOLS
)

PATHS = ["secrets/a.txt", "secrets/deep/b", "secretsX/c", "notes/secrets/d", "a.txt"]
URLS = ["https://evil.example/", "https://ok.example/evil", "https://ok.example/"]
CONTENT = ["hi", "TODO later", "a*TODO*b", "todo"]


@st.composite
def calls(draw: Any) -> GuardContext:
    tool = draw(st.sampled_from(["fs.write", "fs.edit", "http.request", "fs.delete", "fs.read"]))
    skill = draw(st.sampled_from(["janitor", "editor", None]))
    args: dict[str, Any] = {}
    paths: tuple[str, ...] = ()
    if tool == "http.request":
        args = {"method": "GET", "url": draw(st.sampled_from(URLS))}
    else:
        path = draw(st.sampled_from(PATHS))
        paths = (path,)
        args = {"path": path}
        if tool == "fs.write":
            args["content"] = draw(st.sampled_from(CONTENT))
    return GuardContext(tool, args, args, "", skill, (), paths)


def _decision(policies: Any, ctx: GuardContext) -> tuple[Any, ...]:
    decided = evaluate(policies, ctx, REGISTRY if policies is AS_YAML else GuardRegistry())
    refusal = decided.refusal
    return (
        decided.allowed,
        None if refusal is None else (refusal.rule.id, refusal.verdict.code),
        [(o.rule.id, o.effect, o.verdict.code) for o in decided.verdicts],
    )


@settings(max_examples=400, deadline=None)
@given(calls())
def test_equivalent_yaml_and_cedar_rules_decide_the_same(ctx: GuardContext) -> None:
    assert _decision(AS_CEDAR, ctx) == _decision(AS_YAML, ctx)


def test_the_corpus_covers_every_rule_both_ways() -> None:
    corpus = (
        [
            GuardContext(
                "fs.write", {"path": p, "content": c}, {"path": p, "content": c}, "", s, (), (p,)
            )
            for p in PATHS
            for c in CONTENT
            for s in ["janitor", "editor"]
        ]
        + [GuardContext("http.request", {"url": u}, {"url": u}, "", None, ()) for u in URLS]
        + [
            GuardContext("fs.delete", {"path": p}, {"path": p}, "", s, (), (p,))
            for p in PATHS
            for s in ["janitor", "editor", None]
        ]
    )
    seen: set[tuple[str, str]] = set()
    for ctx in corpus:
        cedar, yaml = _decision(AS_CEDAR, ctx), _decision(AS_YAML, ctx)
        assert cedar == yaml, ctx
        seen.update((rule, effect) for rule, effect, _ in cedar[2])
    assert seen == {
        ("editor_change", "recorded"),
        ("no_writes_in_secrets", "refused"),
        ("no_evil_urls", "refused"),
        ("todo_left", "warned"),
        ("janitor_no_delete", "refused"),
        ("notes_ok", "recorded"),
        ("content_checked", "recorded"),
        ("content_checked", "warned"),
    }


def _write(path: str, skill: str | None = "editor", content: str = "hi") -> GuardContext:
    args = {"path": path, "content": content}
    return GuardContext("fs.write", args, args, "", skill, (), (path,))


def test_a_permit_before_a_forbid_does_not_lift_the_refusal() -> None:
    decided = evaluate(AS_CEDAR, _write("secrets/k"), GuardRegistry())
    assert not decided.allowed
    assert [(o.rule.id, o.effect) for o in decided.verdicts] == [
        ("editor_change", "recorded"),
        ("no_writes_in_secrets", "refused"),
    ]
    permit = decided.verdicts[0]
    assert permit.verdict.allowed and permit.verdict.code == "editor_change"
    assert permit.verdict.metadata == {"cedar_policy_id": "editor_change", "cedar_effect": "permit"}
    assert permit.rule.policy_id == "cedar:house.cedar"


def test_a_permit_that_applies_names_its_id_and_lets_the_call_go_on() -> None:
    decided = evaluate(AS_CEDAR, _write("notes/a", skill=None, content="x"), GuardRegistry())
    assert decided.allowed and decided.refusal is None
    [recorded] = decided.verdicts
    assert (recorded.rule.id, recorded.effect, recorded.verdict.code) == (
        "notes_ok",
        "recorded",
        "notes_ok",
    )
    assert recorded.verdict.message == "Cedar policy 'notes_ok' permits this call"
    assert recorded.rule.enforcement == "warn"  # a permit never refuses by its verdict


def test_an_erroring_permit_fails_closed_by_default() -> None:
    policies = load_policy_sources(
        [
            PolicySource(
                "policies/x.cedar",
                '@id("p")\npermit(principal, action, resource) when { context.args.url like "*" };',
            )
        ],
        GuardRegistry(),
        TOOLS,
    )
    ctx = GuardContext("fs.read", {"path": "a"}, {"path": "a"}, "", None, (), ("a",))
    decided = evaluate(policies, ctx, GuardRegistry())
    assert not decided.allowed
    assert decided.refusal is not None and decided.refusal.verdict.code == "guard_error"


def test_a_cedar_refusal_names_its_policy_id() -> None:
    ctx = GuardContext(
        "fs.write",
        {"path": "secrets/k", "content": "x"},
        {"path": "secrets/k", "content": "x"},
        "",
        "s",
        (),
        ("secrets/k",),
    )
    decided = evaluate(AS_CEDAR, ctx, GuardRegistry())
    with pytest.raises(RefusedCall) as info:
        decided.raise_if_refused()
    assert info.value.code == "secret_folder"
    assert info.value.details["rule_id"] == "no_writes_in_secrets"
    assert info.value.details["policy_id"] == "cedar:house.cedar"
    assert "no_writes_in_secrets" in info.value.message


def test_rules_keep_file_order_across_languages() -> None:
    both = load_policy_sources(
        [
            PolicySource(
                "policies/a.cedar",
                '@id("c1")\nforbid(principal, action, resource) when { context.tool == "x" };',
            ),
            PolicySource("policies/b.yaml", YAML),
        ],
        REGISTRY,
        TOOLS,
    )
    assert [r.id for r in both.rules][:2] == ["c1", "editor_change"]
    assert both.policy_ids == ("cedar:a.cedar", "house")


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("forbid(principal, action, resource);", "bad_cedar_policy"),
        ('@id("p")\n@colour("red")\nforbid(principal, action, resource);', "bad_cedar_policy"),
        (
            '@id("p")\nforbid(principal, action == Proctor::Action::"no.such", resource);',
            "unknown_tool",
        ),
        ('@id("p")\nforbid(principal, action, resource) when {', "bad_cedar_policy"),
        ('@id("p")\nforbid(principal, action, resource == ?resource);', "bad_cedar_policy"),
    ],
)
def test_bad_cedar_files_are_refused_at_load(text: str, code: str) -> None:
    with pytest.raises(PolicyLoadError) as info:
        load_policy_sources([PolicySource("policies/x.cedar", text)], GuardRegistry(), TOOLS)
    assert info.value.code == code
    assert "policies/x.cedar" in info.value.message


@pytest.mark.parametrize(
    "text",
    [
        '@id("p")\n@decision("ask")\npermit(principal, action, resource);',
        '@id("p")\n@approval("required")\npermit(principal, action, resource);',
        '@id("p")\n@ask("yes")\nforbid(principal, action, resource);',
        '@id("p")\n@enforcement("block")\npermit(principal, action, resource);',
        '@id("p")\n@enforcement("warn")\npermit(principal, action, resource);',
        '@id("p")\n@enforcement("blok")\nforbid(principal, action, resource);',
        '@id("p")\n@on_error("ignore")\npermit(principal, action, resource);',
        '@id("p")\n@code("Not Snake")\npermit(principal, action, resource);',
        '@id("p")\n@colour("red")\npermit(principal, action, resource);',
        '@id("p")\n@approval\npermit(principal, action, resource);',
        '@id("p")\n@message\nforbid(principal, action, resource);',
    ],
)
def test_a_malformed_annotation_is_refused_naming_file_and_policy(text: str) -> None:
    ok = '@id("q")\nforbid(principal, action, resource) when { context.tool == "x" };\n'
    with pytest.raises(PolicyLoadError) as info:
        load_policy_sources([PolicySource("policies/x.cedar", ok + text)], GuardRegistry(), TOOLS)
    assert info.value.code == "bad_cedar_policy"
    assert info.value.details == {"file": "policies/x.cedar", "policy": "p"}
    assert "policies/x.cedar: policy 'p'" in info.value.message


NAMES = st.sampled_from(
    ["code", "message", "description", "enforcement", "on_error", "decision", "approval", "x"]
)
VALUES = st.sampled_from(["", "block", "warn", "fail_open", "fail_closed", "ask", "a_b", "A b"])


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(NAMES, VALUES, max_size=4), st.booleans())
def test_any_annotation_set_loads_or_is_refused_by_code(
    notes: dict[str, str], permit: bool
) -> None:
    text = "".join(f'@{k}("{v}")\n' for k, v in notes.items())
    text = f'@id("p")\n{text}{"permit" if permit else "forbid"}(principal, action, resource);'
    try:
        loaded = load_policy_sources(
            [PolicySource("policies/x.cedar", text)], GuardRegistry(), TOOLS
        )
    except PolicyLoadError as exc:
        assert exc.code == "bad_cedar_policy" and exc.details["policy"] == "p"
        return
    [rule] = loaded.rules
    assert not set(notes) & {"decision", "approval", "x"}
    assert rule.enforcement == ("warn" if permit else notes.get("enforcement", "block"))
    ctx = GuardContext("fs.read", {"path": "a"}, {"path": "a"}, "", None, (), ("a",))
    decided = evaluate(loaded, ctx, GuardRegistry())
    [outcome] = decided.verdicts
    assert outcome.verdict.allowed is permit
    assert decided.allowed is (permit or notes.get("enforcement") == "warn")


def test_an_evaluation_error_fails_closed() -> None:
    policies = load_policy_sources(
        [
            PolicySource(
                "policies/x.cedar",
                '@id("p")\nforbid(principal, action, resource) when { context.args.url like "*" };',
            )
        ],
        GuardRegistry(),
        TOOLS,
    )
    ctx = GuardContext("fs.read", {"path": "a"}, {"path": "a"}, "", None, (), ("a",))
    decided = evaluate(policies, ctx, GuardRegistry())
    assert not decided.allowed
    assert decided.refusal is not None and decided.refusal.verdict.code == "guard_error"


def test_the_generated_schema_validates_the_policies() -> None:
    schema = cedar_schema({name: tool.schema for name, tool in TOOLS.items()})
    assert set(schema["Proctor"]["actions"]) == set(TOOLS)
    # content_checked reads args.content of fs.delete on purpose (its fail_open is tested):
    # the schema catches exactly that policy, and passes the rest
    checked = cedarpy.validate_policies(CEDAR, schema)
    assert [e.error for e in checked.errors if "args.content" in e.error], checked.errors
    assert len(checked.errors) == 1
    valid = CEDAR.split('\n\n@id("content_checked")')[0]
    checked = cedarpy.validate_policies(valid, schema)
    assert checked.validation_passed, checked.errors
    wrong = valid.replace("context.args has url && context.args.url", "context.args.uri")
    assert not cedarpy.validate_policies(wrong, schema).validation_passed

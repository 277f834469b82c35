"""SKILL.md, run.yaml, references between steps, and choosing a method."""

from __future__ import annotations

import pytest

from proctor.contracts.skill import AgentStep, AskStep, ToolStep
from proctor.errors import ParseError, ProctorError, UsageError
from proctor.parser.skill import (
    build_package,
    package_dir_for,
    parse_ref,
    parse_run_yaml,
    parse_skill_md,
    select_method,
)

PROFILE = """\
minimum_proctor: 0.1.0
default_method: triage
credentials:
  tracker:
    provider: tracker
    audience: https://tracker.example.com
    auth:
      api_key: {delivery: {env: TRACKER_TOKEN}}
methods:
  triage:
    description: Read an issue export, draft a reply, and post it once a person approves.
    effects: ask
    inputs:
      type: object
      properties: {export: {type: string}}
      required: [export]
    steps:
      - id: load
        tool: fs.read
        inputs: {path: $input.export}
      - id: draft
        agent:
          instructions: Draft a short, kind reply.
          inputs: {text: $steps.load.content}
          calls: {tools: [fs.read, fs.search]}
          ask: false
          output:
            type: object
            properties: {reply: {type: string}}
            required: [reply]
      - id: confirm
        ask: {reason: Post this reply?}
      - id: post
        tool: http.request
        credential: tracker
        idempotency_key: $input.export
        inputs:
          method: POST
          url: https://tracker.example.com/api/comments
          json: {body: $steps.draft.reply}
    result_from: [post]
"""

SRC = "skills/triage/run.yaml"


def test_design_sketch_parses() -> None:
    profile = parse_run_yaml(PROFILE, SRC)
    method = profile.methods["triage"]
    assert [type(step) for step in method.steps] == [ToolStep, AgentStep, AskStep, ToolStep]
    assert profile.credentials["tracker"].auth["api_key"].delivery.env == "TRACKER_TOKEN"
    assert select_method(profile, None)[0] == "triage"


BROKEN = [
    (
        PROFILE.replace("0.1.0", "0.3.0", 1),
        "proctor_too_old",
        1,
        "requires proctor >= 0.3.0; this is 0.1.0",
    ),
    (
        PROFILE.replace("minimum_proctor: 0.1.0\n", ""),
        "minimum_proctor_missing",
        1,
        "minimum_proctor",
    ),
    (
        PROFILE.replace("minimum_proctor: 0.1.0", "minimum_proctor: 0.1"),
        "minimum_proctor_invalid",
        1,
        "0.1.0",
    ),
    (
        PROFILE.replace("tool: fs.read", "tool: fs.read\n        bogus: 1"),
        "run_yaml_unknown_field",
        20,
        "methods.triage.steps[0].bogus",
    ),
    (
        PROFILE.replace("default_method: triage", "default_method: triage\nextra: 1"),
        "run_yaml_unknown_field",
        3,
        "unknown field extra",
    ),
    (
        PROFILE.replace("$steps.load.content", "$steps.post.reply"),
        "reference_unknown_step",
        24,
        "'post'",
    ),
    (
        PROFILE.replace("$steps.load.content", "$steps.draft.x"),
        "reference_unknown_step",
        24,
        "earlier",
    ),
    (
        PROFILE.replace("{path: $input.export}", "{path: $input.nope}"),
        "reference_unknown_input",
        20,
        "'nope'",
    ),
    (
        PROFILE.replace("{path: $input.export}", "{path: $inputs.export}"),
        "invalid_reference",
        20,
        "$inputs.export",
    ),
    (
        PROFILE.replace("result_from: [post]", "result_from: [nope]"),
        "result_from_unknown",
        41,
        "'nope'",
    ),
    (
        PROFILE.replace("credential: tracker", "credential: other"),
        "credential_unknown",
        35,
        "'other'",
    ),
    (PROFILE.replace("id: confirm", "id: load"), "step_id_duplicate", 31, "'load'"),
    (PROFILE.replace("id: confirm", "id: Confirm"), "run_yaml_invalid", 31, "steps[2].id"),
    (
        PROFILE.replace("ask: {reason: Post this reply?}", "ask: {}"),
        "run_yaml_invalid",
        32,
        "exactly one",
    ),
    (
        PROFILE.replace("        ask: {reason: Post this reply?}\n", ""),
        "run_yaml_invalid",
        31,
        "exactly one of: tool",
    ),
    (PROFILE.replace("ask: false", "ask: 'no'"), "run_yaml_invalid", 26, "agent.ask"),
    (
        PROFILE.replace("default_method: triage", "default_method: nope"),
        "default_method_unknown",
        2,
        "triage",
    ),
    (
        PROFILE + "  other:\n    steps: [{id: a, tool: echo}]\n",
        "method_description_missing",
        42,
        "'other'",
    ),
    ("- a\n", "run_yaml_not_mapping", 1, "mapping"),
    (PROFILE.replace("methods:", "methods:\n  x: &a {}\n"), "yaml_anchor", 10, "anchor"),
]


@pytest.mark.parametrize(("text", "code", "line", "needle"), BROKEN)
def test_refusals_name_what_and_where(text: str, code: str, line: int, needle: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse_run_yaml(text, SRC)
    error = caught.value
    assert (error.code, error.line) == (code, line), str(error)
    assert needle in str(error)
    assert str(error).startswith(f"{SRC}:{line}:")


def test_minimum_proctor_is_read_before_anything_else() -> None:
    future = (
        "minimum_proctor: 9.0.0\nmethods: {x: {steps: [{id: a, teleport: yes}]}}\nnew_field: 1\n"
    )
    with pytest.raises(ParseError) as caught:
        parse_run_yaml(future, SRC)
    assert caught.value.code == "proctor_too_old"
    with pytest.raises(ParseError) as later:
        parse_run_yaml(future, SRC, proctor_version="9.0.0")
    assert later.value.code == "run_yaml_invalid"  # the step with no kind


def test_newer_proctor_accepts_older_minimum() -> None:
    assert parse_run_yaml(PROFILE, SRC, proctor_version="0.2.0").minimum_proctor == "0.1.0"


def test_other_step_kinds_are_modelled() -> None:
    text = (
        "minimum_proctor: 0.1.0\nmethods:\n  m:\n    inputs: {type: object}\n    steps:\n"
        "      - {id: child, skill: ./skills/other#go, inputs: {a: $input.a}}\n"
        "      - {id: q, ask: {questions: [{id: why, prompt: Why?}]}}\n"
        "      - {id: w, worker: {module: summarise.py, function: main}}\n"
        "      - {id: op, operation: tracker/comment.create}\n"
    )
    profile = parse_run_yaml(text, SRC)
    assert [step.id for step in profile.methods["m"].steps] == ["child", "q", "w", "op"]


def test_method_without_inputs_takes_none() -> None:
    text = (
        "minimum_proctor: 0.1.0\nmethods:\n  m:\n"
        "    steps: [{id: a, tool: echo, inputs: {x: $input.y}}]\n"
    )
    with pytest.raises(ParseError) as caught:
        parse_run_yaml(text, SRC)
    assert caught.value.code == "reference_unknown_input"


def test_select_method_rules() -> None:
    two = PROFILE.replace("default_method: triage\n", "") + (
        "  other:\n    description: Another.\n    steps: [{id: a, tool: echo}]\n"
    )
    profile = parse_run_yaml(two, SRC)
    assert select_method(profile, "other")[0] == "other"
    with pytest.raises(UsageError) as ambiguous:
        select_method(profile, None)
    assert ambiguous.value.code == "method_ambiguous"
    assert "other, triage" in str(ambiguous.value)
    with pytest.raises(UsageError) as unknown:
        select_method(profile, "nope")
    assert unknown.value.code == "method_unknown"
    assert "other, triage" in str(unknown.value)


def test_parse_ref() -> None:
    assert parse_ref("./skills/x#go") == ("./skills/x", "go")
    assert parse_ref("skills/x") == ("skills/x", None)
    for bad in ("", "#go", "x#", "x#a#b", "x#Bad Name"):
        with pytest.raises(UsageError):
            parse_ref(bad)


SKILL_MD = "---\nname: triage\ndescription: Triage issues.\nlicense: MIT\n---\n# Triage\nDo it.\n"


def test_skill_md() -> None:
    front, body = parse_skill_md(SKILL_MD, "skills/triage/SKILL.md")
    assert front == {"name": "triage", "description": "Triage issues.", "license": "MIT"}
    assert body == "# Triage\nDo it.\n"


@pytest.mark.parametrize(
    ("text", "code", "line"),
    [
        ("# no frontmatter\n", "skill_md_frontmatter", 1),
        ("---\nname: x\n", "skill_md_frontmatter", 1),
        ("---\nname: x\n---\nbody\n", "skill_md_field", 1),
        ("---\nname: x\ndescription: 3\n---\n", "skill_md_field", 3),
        ("---\nname: x\nname: y\ndescription: d\n---\n", "yaml_duplicate_key", 3),
    ],
)
def test_skill_md_refusals(text: str, code: str, line: int) -> None:
    with pytest.raises(ParseError) as caught:
        parse_skill_md(text, "s/SKILL.md")
    assert (caught.value.code, caught.value.line) == (code, line)


def test_build_package() -> None:
    package = build_package(
        "skills/triage", {"SKILL.md": SKILL_MD, "run.yaml": PROFILE, "tests/a.yaml": ""}
    )
    assert package.name == "triage"
    assert package.profile is not None
    assert package.files == ("SKILL.md", "run.yaml", "tests/a.yaml")
    bare = build_package("skills/triage", {"SKILL.md": SKILL_MD})
    assert bare.profile is None


def test_a_lone_markdown_file_is_not_a_package() -> None:
    with pytest.raises(ProctorError) as caught:
        build_package("notes", {"notes.md": SKILL_MD})
    assert caught.value.code == "not_a_package"
    assert "folder holding SKILL.md" in str(caught.value)
    with pytest.raises(UsageError) as ref:
        package_dir_for("docs/readme.md", is_dir=False)
    assert ref.value.code == "not_a_package"
    assert package_dir_for("skills/x/SKILL.md", is_dir=False) == "skills/x"
    assert package_dir_for("skills/x", is_dir=True) == "skills/x"


def test_a_package_written_for_runx_states_minimum_runx_instead() -> None:
    runx = PROFILE.replace("minimum_proctor: 0.1.0", "minimum_runx: 0.12.0")
    profile = parse_run_yaml(runx, SRC)
    assert (profile.minimum_runx, profile.minimum_proctor) == ("0.12.0", None)
    future = "minimum_runx: 0.13.0\nmethods: {x: {steps: [{id: a, teleport: yes}]}}\n"
    with pytest.raises(ParseError) as newer:
        parse_run_yaml(future, SRC)
    assert newer.value.code == "runx_too_new"  # read before anything else, as runx does
    both = PROFILE.replace("minimum_proctor: 0.1.0", "minimum_proctor: 0.1.0\nminimum_runx: 0.12.0")
    with pytest.raises(ParseError) as twice:
        parse_run_yaml(both, SRC)
    assert twice.value.code == "minimum_proctor_invalid"
    with pytest.raises(ParseError) as bad:
        parse_run_yaml(PROFILE.replace("minimum_proctor: 0.1.0", "minimum_runx: twelve"), SRC)
    assert bad.value.code == "minimum_proctor_invalid"

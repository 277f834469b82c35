"""run.yaml fields of the runx reference: step effects/reach/result_as, process tools, waits,
runner profiles and inputs a step reads without declaring them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.contracts.skill import OperationStep, ProcessStep, WaitStep
from proctor.errors import ParseError
from proctor.parser.skill import parse_run_yaml
from proctor.parser.waits import MAX_UNTIL_MS, literal_until
from tests.fuzzing import FUZZ, as_yaml, mutated, only_proctor_errors, spliced

SRC = "skills/x/run.yaml"

# The runx reference's own example of a method (no inputs declared, $input read by its step).
MOLTBOOK = """minimum_runx: 0.12.0
methods:
  publish:
    description: Publish one post to a submolt, once its exact text is approved.
    result_from: [publish]
    steps:
      - id: publish
        operation: moltbook/post.create
        idempotency_key: $input.idempotency_key
        approval:
          reason: Approve publishing this exact post.
          type: moltbook_post
        result:
          required: [post]
        inputs:
          submolt_name: $input.submolt
          title: $input.title
          content: $input.body
"""

# The credentials document's package: a credential and a graph runner naming it.
NITROSEND = """minimum_runx: 0.12.0
credentials:
  nitrosend:
    provider: nitrosend
    audience: https://api.nitrosend.com
    auth:
      api_key:
        delivery:
          env: NITROSEND_API_KEY
runners:
  status:
    default: true
    type: graph
    credential: nitrosend
methods:
  status:
    steps:
      - id: fetch
        tool: http.request
        inputs: {method: GET, url: "https://api.nitrosend.com/status"}
      - id: note
        tool: fs.read
        inputs: {path: README.md}
"""


def _refused(text: str) -> ParseError:
    with pytest.raises(ParseError) as caught:
        parse_run_yaml(text, SRC)
    return caught.value


def test_the_reference_example_reads_its_undeclared_inputs_as_required() -> None:
    method = parse_run_yaml(MOLTBOOK, SRC).methods["publish"]
    assert method.inputs["properties"] == {
        "idempotency_key": {},
        "submolt": {},
        "title": {},
        "body": {},
    }
    assert sorted(method.inputs["required"]) == ["body", "idempotency_key", "submolt", "title"]
    assert method.inputs["additionalProperties"] is False


def test_an_operation_steps_approval_and_result_contract_are_read() -> None:
    (step,) = parse_run_yaml(MOLTBOOK, SRC).methods["publish"].steps
    assert isinstance(step, OperationStep)
    assert step.approval is not None
    assert step.approval.reason == "Approve publishing this exact post."
    assert step.approval.type == "moltbook_post"
    assert step.result is not None and step.result.required == ["post"]


@pytest.mark.parametrize(
    ("change", "code", "path"),
    [
        ("type: moltbook_post", "kind: moltbook_post", "approval.kind"),
        ("reason: Approve publishing this exact post.", "reason: ''", "approval.reason"),
        ("type: moltbook_post", "type: 'two words'", "approval.type"),
        ("required: [post]", "required: []", "result.required"),
        ("required: [post]", "required: post", "result.required"),
        ("required: [post]", "required: [post]\n          optional: [x]", "result.optional"),
    ],
)
def test_bad_approval_and_result_fields_are_refused_naming_them(
    change: str, code: str, path: str
) -> None:
    assert change in MOLTBOOK
    error = _refused(MOLTBOOK.replace(change, code))
    unknown = code.startswith("kind:") or "optional" in code
    assert error.code == ("run_yaml_unknown_field" if unknown else "run_yaml_invalid"), error
    assert error.details["path"] == "methods.publish.steps[0]." + path
    assert error.line is not None


def test_approval_and_result_belong_to_operation_steps_only() -> None:
    text = NITROSEND.replace(
        "inputs: {path: README.md}", "inputs: {path: README.md}\n        approval: {reason: r}"
    )
    error = _refused(text)
    assert error.code == "run_yaml_unknown_field"
    assert error.details["path"] == "methods.status.steps[1].approval"


def test_a_proctor_package_still_declares_every_input() -> None:
    mine = MOLTBOOK.replace("minimum_runx: 0.12.0", "minimum_proctor: 0.1.0")
    assert _refused(mine).code == "reference_unknown_input"


def test_declared_inputs_keep_their_schema_and_gain_only_what_is_read() -> None:
    text = MOLTBOOK.replace(
        "    result_from: [publish]\n",
        "    result_from: [publish]\n    inputs:\n      type: object\n"
        "      properties: {title: {type: string, maxLength: 80}}\n      required: [title]\n",
    )
    inputs = parse_run_yaml(text, SRC).methods["publish"].inputs
    assert inputs["properties"]["title"] == {"type": "string", "maxLength": 80}
    assert inputs["required"][0] == "title"
    assert sorted(inputs["required"]) == ["body", "idempotency_key", "submolt", "title"]


def test_a_graph_runner_is_its_method_its_default_and_gives_its_credential() -> None:
    profile = parse_run_yaml(NITROSEND, SRC)
    assert profile.default_method == "status"
    fetch, note = profile.methods["status"].steps
    assert getattr(fetch, "credential", None) == "nitrosend"
    assert getattr(note, "credential", None) is None  # fs.read reaches no provider


@pytest.mark.parametrize(
    ("change", "code", "path"),
    [
        ("type: graph", "type: hosted", "runners.status.type"),
        ("type: graph", "type: cli-tool", "runners.status.type"),
        ("credential: nitrosend", "credential: other", "runners.status.credential"),
        ("  status:\n    default: true", "  stats:\n    default: true", "runners.stats"),
    ],
)
def test_runner_fields_proctor_refuses_are_named(change: str, code: str, path: str) -> None:
    codes = {
        "runners.status.type": "runner_type_unsupported",
        "runners.status.credential": "credential_unknown",
        "runners.stats": "runner_method_missing",
    }
    error = _refused(NITROSEND.replace(change, code, 1))
    assert (error.code, error.details["path"]) == (codes[path], path)


def test_two_defaults_are_refused() -> None:
    other = "  other:\n    description: Other.\n    steps: [{id: a, tool: echo}]\n"
    text = NITROSEND.replace("methods:\n", "default_method: other\nmethods:\n" + other, 1)
    text = text.replace("  status:\n    steps:", "  status:\n    description: S.\n    steps:")
    assert _refused(text).code == "runner_default_conflict"


STEPS = """minimum_runx: 0.12.0
methods:
  main:
    steps:
      - id: run
        effects: none
        reach: workspace
        result_as: report
        tool: {command: node, args: [run.mjs, $input.topic], cwd: bin, timeout_seconds: 9}
      - id: later
        wait: {until: "2027-05-01T10:00:00+02:00"}
      - id: use
        tool: echo
        inputs: {text: $steps.run.report.stdout}
"""


def test_step_fields_process_tools_and_waits_are_read() -> None:
    run, later, use = parse_run_yaml(STEPS, SRC).methods["main"].steps
    assert isinstance(run, ProcessStep)
    assert (run.effects, run.reach, run.result_as) == ("none", "workspace", "report")
    assert (run.tool.command, run.tool.args, run.tool.cwd) == (
        "node",
        ["run.mjs", "$input.topic"],
        "bin",
    )
    assert isinstance(later, WaitStep) and later.wait.until == "2027-05-01T10:00:00+02:00"
    assert use.effects is None


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ("effects: none", "effects: never"),
        ("reach: workspace", "reach: everywhere"),
        ("result_as: report", "result_as: 9report"),
        ("cwd: bin", "cwd: ../up"),
        ("cwd: bin", "cwd: /abs"),
        ('until: "2027-05-01T10:00:00+02:00"', 'until: "2027-05-01T10:00:00"'),
        ('until: "2027-05-01T10:00:00+02:00"', "until: true"),
        ("wait: {until", "wait: {seconds: 5, until"),
        ("$steps.run.report.stdout", "$steps.run.stdout"),
        ("timeout_seconds: 9", "timeout_seconds: 0"),
        ("cwd: bin", "module: run.mjs"),
    ],
)
def test_bad_step_fields_are_refused_naming_them(change: str, code: str) -> None:
    assert change in STEPS
    error = _refused(STEPS.replace(change, code))
    expected = {
        "cwd: ../up": "process_tool_cwd_invalid",
        "cwd: /abs": "process_tool_cwd_invalid",
        'until: "2027-05-01T10:00:00"': "wait_until_invalid",
        "$steps.run.stdout": "reference_unknown_output",
        "module: run.mjs": "process_tool_module_unsupported",
    }.get(code, "run_yaml_invalid")
    assert error.code == expected, error
    assert error.line is not None


def test_a_module_tool_is_refused_by_name() -> None:
    text = STEPS.replace("tool: {command: node, args: [run.mjs, $input.topic], cwd: bin,"
                         " timeout_seconds: 9}", "tool: {module: inventory.mjs}")  # fmt: skip
    error = _refused(text)
    assert error.code == "process_tool_module_unsupported"
    assert error.details["path"] == "methods.main.steps[0].tool.module"


def test_literal_until_reads_milliseconds_and_times_with_an_offset() -> None:
    assert literal_until(0) == 0
    assert literal_until("1500") == 1500  # digits as text: what `-i until=1500` gives
    assert literal_until("1970-01-01T00:00:01Z") == 1000
    assert literal_until("1970-01-01T01:00:01+01:00") == 1000
    for bad in (True, -1, MAX_UNTIL_MS + 1, "soon", "1970-01-01T00:00:01", 1.5, None, "x" * 65):
        with pytest.raises(ValueError):
            literal_until(bad)


@FUZZ
@given(st.one_of(st.integers(), st.text(max_size=40), st.floats(), st.none(), st.booleans()))
def test_fuzz_literal_until_gives_a_time_or_value_error(value: Any) -> None:
    try:
        got = literal_until(value)
    except ValueError as exc:
        assert repr(value) not in str(exc) or len(repr(value)) < 3
        return
    assert isinstance(got, int)


BASE: dict[str, Any] = {
    "minimum_runx": "0.12.0",
    "credentials": {"c": {"provider": "p", "auth": {"k": {"delivery": {"env": "K"}}}}},
    "runners": {"main": {"type": "graph", "default": True, "credential": "c"}},
    "methods": {
        "main": {
            "steps": [
                {"id": "a", "effects": "ask", "reach": "workspace", "result_as": "out",
                 "tool": {"command": "node", "args": ["x.mjs", "$input.q"], "cwd": "bin"}},
                {"id": "b", "wait": {"until": "$input.when"}},
                {"id": "c", "wait": {"seconds": 5}},
                {"id": "d", "tool": "echo", "inputs": {"text": "$steps.a.out"}},
                {"id": "e", "operation": "m/post.create", "idempotency_key": "$input.k",
                 "approval": {"reason": "Approve it.", "type": "m_post"},
                 "result": {"required": ["post"]}, "inputs": {"t": "$input.t"}},
            ]
        }
    },
}  # fmt: skip


def test_the_fuzz_base_is_valid() -> None:
    parse_run_yaml(as_yaml(BASE), SRC)


@FUZZ
@given(mutated(BASE))
def test_fuzz_runx_fields_only_proctor_errors(doc: Any) -> None:
    only_proctor_errors(lambda: parse_run_yaml(as_yaml(doc), SRC))


@FUZZ
@given(spliced(STEPS + NITROSEND.split("\n", 1)[1]))
def test_fuzz_runx_text_only_proctor_errors(text: str) -> None:
    only_proctor_errors(lambda: parse_run_yaml(text, SRC))

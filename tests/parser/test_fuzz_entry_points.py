"""Fuzz the parser's entry points: run.yaml and SKILL.md (``build_package``, as ``proctor run``
and ``proctor check`` read a package), directives, ``--inputs`` documents, ``-i`` values and the
inputs' validation against a method's schema. Only a ProctorError may escape.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from proctor.parser.directive import parse_directive
from proctor.parser.inputs import coerce_cli_inputs, parse_inputs_document, validate_inputs
from proctor.parser.skill import build_package, parse_run_yaml, select_method
from proctor.parser.yaml_strict import load_yaml
from tests.fuzzing import FUZZ, VALUES, as_yaml, mutated, only_proctor_errors, spliced

RUN_YAML = """\
minimum_proctor: 0.1.0
default_method: main
credentials:
  tracker:
    provider: tracker
    audience: https://tracker.example.com
    auth:
      api_key: {delivery: {env: TRACKER_TOKEN}}
methods:
  main:
    description: Read, draft, ask, post.
    effects: ask
    reach: workspace
    inputs:
      type: object
      properties: {export: {type: string}, n: {type: integer, minimum: 0}}
      required: [export]
    outputs:
      type: object
      properties: {post: {type: object}}
    steps:
      - id: load
        tool: fs.read
        inputs: {path: $input.export}
      - id: draft
        agent:
          instructions: Draft a reply.
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
          url: https://tracker.example.com/api
          json: {body: $steps.draft.reply}
    result_from: [post]
"""
BASE = load_yaml(RUN_YAML, source="run.yaml")
SKILL_MD = "---\nname: fuzz\ndescription: A fuzzed skill.\n---\nDo the work.\n"
DIRECTIVE = (
    "---\nid: fuzz\ndescription: Analyze files\ntools: [list_dir, read_file]\ncategory: task\n"
    "---\n\n# Fuzz\n\nSteps.\n"
)


def _package(skill_md: str, run_yaml: str) -> None:
    package = build_package("skills/fuzz", {"SKILL.md": skill_md, "run.yaml": run_yaml})
    assert package.profile is not None
    _, method = select_method(package.profile, None)
    # what the driver does next with the method's schema, on some inputs
    for inputs in ({}, {"export": "a"}, {"export": 1, "n": -1}):
        only_proctor_errors(lambda i=inputs: validate_inputs(dict(i), method.inputs))  # type: ignore[misc]


def test_the_base_documents_are_valid() -> None:
    _package(SKILL_MD, RUN_YAML)
    parse_directive(DIRECTIVE, file_stem="fuzz", source="directives/fuzz.md")


@FUZZ
@given(mutated(BASE))
def test_run_yaml_with_a_subtree_replaced(doc: Any) -> None:
    only_proctor_errors(lambda: _package(SKILL_MD, as_yaml(doc)))


@FUZZ
@given(spliced(RUN_YAML))
def test_run_yaml_text_spliced(text: str) -> None:
    only_proctor_errors(lambda: _package(SKILL_MD, text))


@FUZZ
@given(st.one_of(spliced(SKILL_MD), st.text(max_size=200)))
def test_skill_md(text: str) -> None:
    only_proctor_errors(lambda: build_package("skills/fuzz", {"SKILL.md": text}))


@FUZZ
@given(st.one_of(spliced(DIRECTIVE), st.text(max_size=200)), st.sampled_from(["fuzz", "x.y"]))
def test_directive(text: str, stem: str) -> None:
    only_proctor_errors(lambda: parse_directive(text, file_stem=stem, source="directives/f.md"))


@FUZZ
@given(
    st.one_of(
        VALUES.map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=64),
        spliced('{"export": "a", "n": 1, "opts": {"k": [1, 2]}}').map(str.encode),
    )
)
def test_inputs_document(data: bytes) -> None:
    only_proctor_errors(lambda: parse_inputs_document(data, source="--inputs"))


@FUZZ
@given(st.lists(st.text(max_size=30), max_size=4), mutated(BASE["methods"]["main"]["inputs"]))
def test_cli_inputs_against_any_schema(pairs: list[str], schema: Any) -> None:
    def go() -> None:
        values = coerce_cli_inputs(pairs, schema if isinstance(schema, dict) else {})
        validate_inputs(values, schema if isinstance(schema, dict) else {})

    only_proctor_errors(go)


@FUZZ
@given(mutated(BASE))
def test_run_yaml_minimum_version_is_read_first(doc: Any) -> None:
    only_proctor_errors(lambda: parse_run_yaml(as_yaml(doc), "run.yaml", proctor_version="0.1.0"))

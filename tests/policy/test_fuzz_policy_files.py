"""Fuzz policy files through the loader ``proctor run`` and ``proctor check`` use: only a
PolicyLoadError (a ProctorError with a code) may escape, whatever the file holds."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from proctor.errors import PolicyLoadError
from proctor.parser.yaml_strict import load_yaml
from proctor.policy import GuardRegistry
from proctor.policy.loader import PolicySource, load_policy_sources
from tests.fuzzing import FUZZ, as_yaml, mutated, spliced
from tests.policy.conftest import TOOLS

POLICY = """\
id: team
rules:
  - id: reasons
    description: say why
    guard: check_reason_not_empty
    enforcement: warn
    on_error: fail_open
    tools: [fs.write, write_file]
    directives: [fuzz]
    scope: all
  - a bare string rule
"""
BASE = load_yaml(POLICY, source="policies/team.yaml")
REGISTRY = GuardRegistry.with_shipped()


def _load(text: str) -> None:
    try:
        load_policy_sources([PolicySource("policies/team.yaml", text)], REGISTRY, TOOLS)
    except PolicyLoadError as exc:
        assert exc.code and exc.exit_code == 3


def test_the_base_file_loads() -> None:
    _load(POLICY)


@FUZZ
@given(mutated(BASE))
def test_a_subtree_replaced(doc: Any) -> None:
    _load(as_yaml(doc))


@FUZZ
@given(st.one_of(spliced(POLICY), st.text(max_size=200)))
def test_text_spliced_or_arbitrary(text: str) -> None:
    _load(text)

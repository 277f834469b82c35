"""A rule field of the wrong type is a PolicyLoadError with a code, never a TypeError.

``enforcement: [block]`` or ``on_error: {a: 1}`` used to reach ``value in frozenset`` and raise
TypeError (unhashable): a traceback, and ``proctor run`` left its run ``running``. Now the
loader refuses the rule by name: ``proctor check`` fails naming the code, and ``proctor run``
seals the run ``blocked`` in preparation (before any step) with the code as its refusal.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.errors import PolicyLoadError
from proctor.policy import GuardRegistry, load_policies
from tests.policy.conftest import TOOLS, write

REPO = Path(__file__).resolve().parents[2]
RULE = """
id: team
rules:
  - id: r1
    guard: check_reason_not_empty
    enforcement: {enforcement}
    on_error: {on_error}
"""


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("enforcement", "[block]", "unknown_enforcement"),
        ("enforcement", "{a: 1}", "unknown_enforcement"),
        ("enforcement", "7", "unknown_enforcement"),
        ("on_error", "[fail_open, fail_closed]", "unknown_on_error"),
        ("on_error", "{fail_open: true}", "unknown_on_error"),
        ("on_error", "null", "unknown_on_error"),
    ],
)
def test_a_field_of_the_wrong_type_is_a_load_error(
    tmp_path: Path, registry: GuardRegistry, field: str, value: str, code: str
) -> None:
    values = {"enforcement": "block", "on_error": "fail_closed", field: value}
    write(tmp_path / "policies", "team.yaml", RULE.format(**values))
    with pytest.raises(PolicyLoadError) as info:
        load_policies(tmp_path / "policies", registry, TOOLS)
    assert info.value.code == code
    assert "rule 'r1'" in info.value.message and "of type" in info.value.message


def test_check_and_run_refuse_it_by_code(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    shutil.copytree(REPO / "examples" / "hello-world", root / "skills" / "hello-world")
    write(root / "policies", "team.yaml", RULE.format(enforcement="[block]", on_error="fail_open"))
    env = {"PROCTOR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO / "src")}

    def proctor(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "proctor", *args],
            cwd=root, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    checked = proctor("check")
    assert "Traceback" not in checked.stderr
    assert "unknown_enforcement" in checked.stdout + checked.stderr
    assert checked.returncode != 0
    ran = proctor("run", "hello-world", "-i", "message=hi", "--json")
    assert "Traceback" not in ran.stderr
    envelope = json.loads(ran.stdout)
    assert (envelope["status"], envelope["outcome"]) == ("sealed", "blocked")
    assert envelope["refusal"]["code"] == "unknown_enforcement"
    assert envelope["trace"] == []

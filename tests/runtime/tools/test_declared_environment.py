"""A package's declared ``environment``: the variables it names are given to its commands,
nothing else of the session's environment is; a missing required one refuses the run before
any step; a declaration naming a proctor setting or a credential's delivery is refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from proctor.errors import ProctorError
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

PY = sys.executable
SHOW = "import json, os; print(json.dumps(dict(os.environ)))"

PACKAGE = f"""minimum_proctor: 0.1.0
environment:
  required: [MODE]
  optional: [LEVEL, UNSET_ONE]
methods:
  main:
    steps:
      - id: show
        tool: command.execute
        inputs: {{argv: ["{PY}", "-c", "{SHOW}"]}}
      - id: mark
        tool: fs.write
        inputs: {{path: ran.txt, content: "ran\\n", create: true}}
    result_from: [show]
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "envy", PACKAGE)
    return root


def _environ(root: Path, **values: str) -> dict[str, str]:
    return {"PROCTOR_HOME": str(root / ".home"), "PATH": "/usr/bin:/bin", **values}


def test_declared_values_reach_the_command_and_nothing_else_does(ws: Path) -> None:
    environ = _environ(ws, MODE="fast", LEVEL="3", UNDECLARED="leak-me")
    env = session(ws, environ=environ).run("envy", cwd=ws)
    assert env.outcome == "completed", env.refusal
    seen = json.loads(env.result["stdout"])
    assert seen["MODE"] == "fast" and seen["LEVEL"] == "3"
    assert "UNSET_ONE" not in seen and "UNDECLARED" not in seen
    assert not any(name.startswith("PROCTOR_") for name in seen)


def test_a_missing_required_variable_refuses_before_any_step(ws: Path) -> None:
    env = session(ws, environ=_environ(ws, LEVEL="3")).run("envy", cwd=ws)
    assert env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "environment_missing"
    assert "MODE" in env.refusal.message
    assert not (ws / "ran.txt").exists()


@pytest.mark.parametrize(
    ("declaration", "code"),
    [
        ("environment: {optional: [PROCTOR_DATABASE_URL]}", "environment_reserved"),
        (
            "credentials:\n  api: {provider: acme, auth: {token: {delivery: {env: API_TOKEN}}}}\n"
            "environment: {required: [API_TOKEN]}",
            "environment_is_credential",
        ),
    ],
)
def test_a_declaration_naming_a_setting_or_a_secret_is_refused(
    ws: Path, declaration: str, code: str
) -> None:
    make_skill(
        ws,
        "bad",
        PACKAGE.replace(
            "environment:\n  required: [MODE]\n  optional: [LEVEL, UNSET_ONE]", declaration
        ),
    )
    with pytest.raises(ProctorError) as refused:
        session(ws, environ=_environ(ws, MODE="x")).run("bad", cwd=ws)
    assert refused.value.code == code
    assert not (ws / "ran.txt").exists()

"""Structured questions through the real CLI: options with a label, a detail and one
recommended are shown in the terminal and answered there, by number in a real terminal (tmux)
and by name from a script; a malformed question is refused when the skill is read."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Ws

SKILL = "---\nname: survey\ndescription: Ask where to ship first.\n---\n"
SURVEY = """minimum_proctor: 0.1.0
methods:
  survey:
    description: Ask where to ship first, then say it.
    steps:
      - id: where
        ask:
          questions:
            - id: region
              prompt: Which region ships first?
              options:
                - {label: eu, detail: "Frankfurt, closest to most users", recommended: true}
                - {label: us, detail: Virginia}
                - {label: ap, detail: Singapore}
            - id: note
              prompt: Anything to add?
              required: false
      - id: say
        tool: echo
        inputs: {text: $steps.where.answers.region.option}
"""


def survey(ws: Ws) -> Path:
    pkg = ws.root / "skills" / "survey"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "SKILL.md").write_text(SKILL)
    (pkg / "run.yaml").write_text(SURVEY)
    return pkg


def _paused(ws: Ws) -> dict[str, Any]:
    survey(ws)
    out = ws.proctor("run", "survey", "--json")
    assert out.code == 10, out.stderr
    return dict(out.json())


def test_the_request_states_each_option_with_its_detail_and_the_recommended_one(ws: Ws) -> None:
    doc = _paused(ws)
    (request,) = doc["requests"]
    region, note = request["questions"]
    assert region["options"] == [
        {"label": "eu", "detail": "Frankfurt, closest to most users", "recommended": True},
        {"label": "us", "detail": "Virginia"},
        {"label": "ap", "detail": "Singapore"},
    ]
    assert region["free_text"] is False and note["free_text"] is True
    assert doc["answers_template"]["approvals"]["where"]["value"] == {"region": {}, "note": {}}


def test_a_script_answers_by_label_and_a_wrong_label_is_refused(ws: Ws) -> None:
    doc = _paused(ws)
    run_id, digest = doc["run_id"], doc["requests"][0]["request_digest"]
    wrong = ws.proctor(
        "approve", run_id, "--yes", "--digest", digest, "--answer", "region=mars", "--json"
    )
    assert wrong.code != 0 and "answer_invalid" in wrong.stdout + wrong.stderr
    assert "Traceback" not in wrong.stderr
    done = ws.proctor(
        "approve", run_id, "--yes", "--digest", digest,
        "--answer", "region=ap", "--answer", "note=in May", "--json",
    )  # fmt: skip
    assert done.code == 0, done.stderr
    assert done.json()["outcome"] == "completed"
    assert done.json()["result"] == {"text": "ap"} or "ap" in done.stdout


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ("[{label: a, recommended: true}, {label: b, recommended: true}]", "recommended"),
        ("[{label: a}, {label: b}, {label: c}, {label: d}, {label: e}]", "4"),
        ("[{label: a}, {label: a}]", "differ"),
        ("[{label: a, colour: red}]", "colour"),
    ],
)
def test_a_malformed_question_is_refused_when_the_skill_is_read(
    ws: Ws, options: str, words: str
) -> None:
    pkg = survey(ws)
    (pkg / "run.yaml").write_text(
        SURVEY.replace(
            """options:
                - {label: eu, detail: "Frankfurt, closest to most users", recommended: true}
                - {label: us, detail: Virginia}
                - {label: ap, detail: Singapore}""",
            f"options: {options}",
        )
    )
    out = ws.proctor("run", "survey", "--json")
    assert out.code != 0 and out.code != 10
    assert words in out.stdout + out.stderr
    assert "Traceback" not in out.stderr


def _capture(base: list[str]) -> str:
    out = subprocess.run([*base, "capture-pane", "-p", "-J"], capture_output=True, text=True)
    return out.stdout


def _wait_screen(base: list[str], marker: str, deadline: float = 60.0) -> str:
    end = time.monotonic() + deadline
    while True:
        screen = _capture(base)
        if marker in screen:
            return screen
        assert time.monotonic() < end, f"{marker!r} never appeared:\n{screen}"
        time.sleep(0.05)


def test_tmux_a_person_picks_an_option_by_number_and_adds_words(ws: Ws, tmp_path: Path) -> None:
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("tmux is not installed")
    doc = _paused(ws)
    sock = f"proctor-questions-{os.getpid()}"
    done = tmp_path / "exit-code"
    script = tmp_path / "answer.sh"
    exports = " ".join(
        f"{k}={shlex.quote(v)}" for k, v in ws.env.items() if k.startswith(("PROCTOR_", "PYTHON"))
    )
    script.write_text(
        f"cd {shlex.quote(str(ws.root))} && env {exports} TERM=xterm-256color"
        f" {shlex.quote(sys.executable)} -m proctor approve {doc['run_id']};"
        f" echo $? > {shlex.quote(str(done))}; sleep 600\n"
    )
    base = [tmux, "-L", sock]
    subprocess.run(
        [*base, "new-session", "-d", "-x", "160", "-y", "50", "sh", str(script)], check=True
    )
    try:
        screen = _wait_screen(base, "region:")
        assert "Which region ships first?" in screen
        assert "1. eu  (recommended)" in screen
        assert "Frankfurt, closest to most users" in screen
        assert "2. us" in screen and "3. ap" in screen
        subprocess.run([*base, "send-keys", "2", "Enter"], check=True)
        _wait_screen(base, "note:")
        subprocess.run([*base, "send-keys", "ship in May", "Enter"], check=True)
        _wait_screen(base, "Send these answers?")
        subprocess.run([*base, "send-keys", "y", "Enter"], check=True)
        deadline = time.monotonic() + 60
        while not done.exists() or not done.read_text().strip():
            assert time.monotonic() < deadline, _capture(base)
            time.sleep(0.05)
        assert done.read_text().strip() == "0", _capture(base)
        assert "completed" in _capture(base)
    finally:
        subprocess.run([*base, "kill-server"], check=False)
    history = ws.proctor("history", doc["run_id"], "--json")
    assert '"us"' in history.stdout
    assert "ship in May" in history.stdout

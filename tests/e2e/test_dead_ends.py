"""No dead ends in the terminal: an agent turn no model worked says the three ways on (with its
output schema), and the way by hand really goes on; the note that no host set an authority is
shown once per workspace (every time with ``--verbose``, always in JSON); ``proctor resume`` on a
terminal says what it reads rather than waiting in silence."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.e2e.conftest import Ws

WRITER = """minimum_proctor: 0.1.0
methods:
  note:
    description: Say something through an agent turn.
    inputs: {type: object, properties: {}}
    steps:
      - id: write
        agent:
          instructions: Say done.
          calls: {tools: [echo]}
          output:
            type: object
            properties: {done: {type: boolean}}
            required: [done]
"""

NOTE = "no host set an authority"


def _writer(ws: Ws) -> None:
    pkg = ws.root / "skills" / "writer"
    pkg.mkdir(parents=True)
    (pkg / "SKILL.md").write_text("---\nname: writer\ndescription: Say done.\n---\nSay done.\n")
    (pkg / "run.yaml").write_text(WRITER)


def test_an_agent_turn_without_a_model_names_the_ways_on(ws: Ws) -> None:
    _writer(ws)
    out = ws.proctor("run", "writer")
    assert out.code == 10, out.stderr
    run_id = next(w for w in out.stdout.split() if len(w) == 32)
    text = out.stdout
    assert 'agent turn write outputs: {"type": "object"' in text
    assert "proctor run writer#note --drive" in text
    assert f"proctor mcp --run {run_id}" in text
    assert f"proctor resume {run_id} answers.json" in text and "answers.write.value" in text
    # the way by hand goes on: the template, its value filled in, the named command
    template = ws.proctor("run", "writer", "--json").json()
    run_id = template["run_id"]
    document = template["answers_template"]
    document["answers"]["write"]["value"] = {"done": True}
    (ws.root / "answers.json").write_text(json.dumps(document))
    done = ws.proctor("resume", run_id, "answers.json", "--json")
    assert done.code == 0 and done.json()["outcome"] == "completed", done.stdout + done.stderr


def test_the_authority_note_is_shown_once_per_workspace(ws: Ws) -> None:
    ws.add_example("hello-world")
    runs = [ws.proctor("run", "hello-world", "-i", "message=hi") for _ in range(2)]
    assert [r.code for r in runs] == [0, 0], runs
    assert NOTE in runs[0].stdout and "--verbose shows it" in runs[0].stdout
    assert NOTE not in runs[1].stdout
    assert NOTE in ws.proctor("run", "hello-world", "-i", "message=hi", "--verbose").stdout
    as_json = ws.proctor("run", "hello-world", "-i", "message=hi", "--json").json()
    assert any(n.startswith(NOTE) for n in as_json["notes"])


def test_resume_on_a_terminal_says_what_it_reads(ws: Ws) -> None:
    import pty

    main, person = pty.openpty()
    try:
        os.write(main, b"\x04")  # Ctrl-D: an empty document
        done = subprocess.run(
            [sys.executable, "-m", "proctor", "resume", "0" * 32],
            cwd=ws.root, env=ws.env, stdin=person, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(person)
        os.close(main)
    assert "reading a proctor.resume.v1 document from this terminal" in done.stderr
    assert f"proctor resume {'0' * 32} FILE" in done.stderr
    assert done.returncode != 0 and "Traceback" not in done.stderr

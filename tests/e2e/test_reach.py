"""``reach`` end to end: a skill reaches a second folder one of its inputs names under
``reach: inputs`` and nowhere else; under ``reach: workspace`` (what a run takes when no host
states an authority) it stays in the workspace.

Each refusal proves the refused effect did not happen, and no output names the host path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.e2e.conftest import Result, Ws

RUN_YAML = """\
minimum_proctor: 0.1.0
default_method: read
methods:
  read:
    description: The read method.
    inputs:
      type: object
      properties:
        repo: {type: string, format: path}
        file: {type: string}
      required: [file]
      additionalProperties: false
    steps:
      - id: read
        tool: fs.read
        inputs: {path: $input.file}
    result_from: [read]
  read_narrow:
    description: The read_narrow method.
    reach: workspace
    inputs:
      type: object
      properties:
        repo: {type: string, format: path}
        file: {type: string}
      required: [file]
      additionalProperties: false
    steps:
      - id: read
        tool: fs.read
        inputs: {path: $input.file}
    result_from: [read]
  list:
    description: The list method.
    inputs:
      type: object
      properties:
        repo: {type: string, format: path}
        folder: {type: string}
      required: [repo, folder]
      additionalProperties: false
    steps:
      - id: list
        tool: fs.list
        inputs: {path: $input.folder, recursive: true}
    result_from: [list]
  replace:
    description: The replace method.
    inputs:
      type: object
      properties:
        repo: {type: string, format: path}
        file: {type: string}
        content: {type: string}
      required: [repo, file, content]
      additionalProperties: false
    steps:
      - id: read
        tool: fs.read
        inputs: {path: $input.file}
      - id: write
        tool: fs.write
        reason: Replace the file.
        inputs:
          path: $input.file
          content: $input.content
          expected_digest: $steps.read.content_digest
    result_from: [write]
  blind:
    description: The blind method.
    inputs:
      type: object
      properties:
        repo: {type: string, format: path}
        file: {type: string}
        content: {type: string}
      required: [repo, file, content]
      additionalProperties: false
    steps:
      - id: write
        tool: fs.write
        reason: Overwrite without reading.
        inputs: {path: $input.file, content: $input.content}
    result_from: [write]
"""

SKILL_MD = """\
---
name: peek
description: Reads and writes files in the workspace or in a folder an input names.
---
# peek
"""


@pytest.fixture
def other(ws: Ws, tmp_path: Path) -> Path:
    folder = ws.root / "skills" / "peek"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    (folder / "run.yaml").write_text(RUN_YAML)
    repo = tmp_path / "other-repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "notes.txt").write_text("from the other repo\n")
    (repo / ".env").write_text("TOKEN=do-not-read\n")
    (repo / ".git").mkdir()
    (repo / ".git" / "config").write_text("[core]\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private.txt").write_text("outside both\n")
    (repo / "src" / "escape.txt").symlink_to(outside / "private.txt")
    return repo


INPUTS = '{"reach": "inputs"}'


def run(ws: Ws, method: str, *inputs: str, authority: str | None = INPUTS) -> Result:
    args = ["run", f"peek#{method}"]
    for pair in inputs:
        args += ["-i", pair]
    if authority is not None:
        args += ["--run-authority", authority]
    return ws.proctor(*args, "--json")


def no_host_path(r: Result, *folders: Path) -> None:
    for folder in folders:
        assert str(folder) not in r.stdout
        assert str(folder) not in r.stderr


def refusal_code(r: Result) -> str:
    env = r.json()
    codes = [env.get("refusal", {}) and env["refusal"].get("code")]
    codes += [t.get("code") for t in env.get("trace", [])]
    return ",".join(c for c in codes if c)


def test_inputs_reach_a_file_in_the_folder_an_input_names(ws: Ws, other: Path) -> None:
    r = run(ws, "read", f"repo={other}", "file=$repo/src/notes.txt")
    assert r.code == 0, r.stdout + r.stderr
    env = r.json()
    assert env["result"]["content"] == "from the other repo\n"
    assert env["result"]["path"] == "$repo/src/notes.txt"
    no_host_path(r, other, ws.root)
    # the same file named by its absolute path is shown in the same form
    r = run(ws, "read", f"repo={other}", f"file={other / 'src' / 'notes.txt'}")
    assert r.code == 0, r.stdout + r.stderr
    assert r.json()["result"]["path"] == "$repo/src/notes.txt"
    assert "from the other repo" in r.stdout
    listed = run(ws, "list", f"repo={other}", "folder=$repo")
    assert listed.code == 0, listed.stdout + listed.stderr
    paths = [e["path"] for e in listed.json()["result"]["entries"]]
    assert "$repo/src/notes.txt" in paths
    assert not any(".env" in p or ".git" in p for p in paths)
    no_host_path(listed, other, ws.root)


@pytest.mark.parametrize(
    ("method", "authority"),
    [("read", '{"reach": "workspace"}'), ("read_narrow", INPUTS), ("read", None)],
    ids=["host", "method", "no_host"],
)
def test_workspace_reach_refuses_the_folder_an_input_names(
    ws: Ws, other: Path, method: str, authority: str | None
) -> None:
    for file in ("$repo/src/notes.txt", str(other / "src" / "notes.txt")):
        r = run(ws, method, f"repo={other}", f"file={file}", authority=authority)
        assert r.code != 0
        env = r.json()
        assert env["outcome"] != "completed"
        assert "from the other repo" not in r.stdout
        assert refusal_code(r).split(",")[-1] in ("path_outside_reach", "path_absolute")
        no_host_path(r, other, ws.root)


def test_with_no_host_authority_a_path_input_reaches_no_other_folder(ws: Ws, other: Path) -> None:
    r = run(ws, "read", f"repo={other}", "file=$repo/src/notes.txt", authority=None)
    assert r.code == 1
    env = r.json()
    assert env["outcome"] == "blocked"
    assert refusal_code(r).split(",")[-1] == "path_outside_reach"
    assert "from the other repo" not in r.stdout + r.stderr
    assert any("reach workspace" in note and "reach: inputs" in note for note in env["notes"])
    log = (ws.root / ".proctor" / "audit.jsonl").read_text(encoding="utf-8")
    events = [json.loads(line) for line in log.splitlines()]
    started = [e for e in events if e["event"] == "run_started"][-1]
    assert started["authority"]["reach"] == "workspace"
    assert started["authority"]["set_by"] == "default"
    no_host_path(r, other, ws.root)


@pytest.mark.parametrize("file", ["$repo/.env", "$repo/.git/config", "$repo/src/escape.txt"])
def test_secrets_and_escapes_in_another_root_are_refused(ws: Ws, other: Path, file: str) -> None:
    r = run(ws, "read", f"repo={other}", f"file={file}")
    assert r.code != 0
    assert "do-not-read" not in r.stdout and "outside both" not in r.stdout
    codes = refusal_code(r)
    assert "sensitive_path" in codes or "path_outside_reach" in codes, codes
    no_host_path(r, other, ws.root)


def test_a_root_inside_a_sensitive_folder_blocks_the_run(ws: Ws, other: Path) -> None:
    r = run(ws, "read", f"repo={other / '.git'}", "file=notes.md")
    assert r.code != 0
    assert "root_invalid" in refusal_code(r)
    no_host_path(r, other)


def test_writes_in_another_root_are_bound_to_digests(ws: Ws, other: Path) -> None:
    target = other / "src" / "notes.txt"
    blind = run(ws, "blind", f"repo={other}", "file=$repo/src/notes.txt", "content=gone\n")
    assert blind.code != 0
    assert target.read_text() == "from the other repo\n"
    r = run(ws, "replace", f"repo={other}", "file=$repo/src/notes.txt", "content=changed\n")
    assert r.code == 0, r.stdout + r.stderr
    assert target.read_text() == "changed\n"
    written = r.json()["result"]
    assert written["path"] == "$repo/src/notes.txt"
    assert written["previous_digest"].startswith("sha256:")
    no_host_path(r, other, ws.root)
    # nothing proctor stored or printed names the other root's files by host path
    audit = (ws.root / ".proctor" / "audit.jsonl").read_text()
    assert str(other) not in audit


def test_a_write_under_ask_shows_the_root_form_and_resumes_in_the_same_root(
    ws: Ws, other: Path
) -> None:
    r = run(
        ws,
        "replace",
        f"repo={other}",
        "file=$repo/src/notes.txt",
        "content=asked\n",
        authority='{"effects": "ask", "reach": "inputs"}',
    )
    env = json.loads(r.stdout)
    assert env["status"] == "needs_approval"
    assert "$repo/src/notes.txt" in r.stdout
    assert (other / "src" / "notes.txt").read_text() == "from the other repo\n"
    no_host_path(r, other, ws.root)
    # the resumed run reaches the roots recorded when it started (no inputs are given again)
    doc = env["answers_template"]
    doc["approvals"]["write"].update({"approved": True, "reason": "fine"})
    done = ws.proctor("resume", env["run_id"], "-", "--json", stdin=json.dumps(doc))
    assert done.code == 0, done.stdout + done.stderr
    assert done.json()["outcome"] == "completed"
    assert (other / "src" / "notes.txt").read_text() == "asked\n"
    no_host_path(done, other, ws.root)


def test_symlinked_root_is_resolved_once(ws: Ws, other: Path, tmp_path: Path) -> None:
    link = tmp_path / "link-to-repo"
    os.symlink(other, link)
    r = run(ws, "read", f"repo={link}", "file=$repo/src/notes.txt")
    assert r.code == 0, r.stdout + r.stderr
    no_host_path(r, other, link)

"""``[workspace] exclusive_commands``: two runs' commands never overlap in one workspace, and the
runs of one tree share their root's hold (issue 31, item 5).

Real ``proctor run`` processes started together; each command writes its own start and end
(nanoseconds) to a shared file, and the test compares the intervals.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SKILL = "---\nname: {name}\ndescription: Commands that take a while.\n---\n"

RUN_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: a
        tool: command.execute
        inputs: {argv: [PY, tools/span.py, NAME-a], timeout_seconds: 120}
      - id: b
        tool: command.execute
        inputs: {argv: [PY, tools/span.py, NAME-b], timeout_seconds: 120}
"""

# Each command stays 0.6 s: two runs started together overlap unless something orders them.
SPAN = """import json, os, sys, time
start = time.time_ns()
time.sleep(0.6)
line = json.dumps({"who": sys.argv[1], "start": start, "end": time.time_ns()}) + "\\n"
fd = os.open("spans.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, line.encode())
os.close(fd)
"""

FANOUT_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {sides: {type: array, items: {type: string}}}
      required: [sides]
    steps:
      - id: each
        skill: ../pair
        for_each: $input.sides
        concurrency: 2
        inputs: {side: $item}
"""

# Each sibling waits for the other's start: only siblings that share the hold both get there.
PAIR_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {side: {type: string}}
      required: [side]
    steps:
      - id: meet
        tool: command.execute
        inputs: {argv: [PY, tools/meet.py, $input.side], timeout_seconds: 60}
"""

MEET = """import pathlib, sys, time
me, other = sys.argv[1], {"left": "right", "right": "left"}[sys.argv[1]]
pathlib.Path(me + ".here").write_text("1")
deadline = time.monotonic() + 30
while not pathlib.Path(other + ".here").exists():
    if time.monotonic() > deadline:
        sys.exit(3)
    time.sleep(0.01)
"""


def _workspace(root: Path, exclusive: bool) -> Path:
    (root / ".proctor").mkdir(parents=True)
    (root / "tools").mkdir()
    (root / "tools" / "span.py").write_text(SPAN)
    (root / "tools" / "meet.py").write_text(MEET)
    for name in ("one", "two"):
        skill = root / "skills" / name
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(SKILL.format(name=name))
        text = RUN_YAML.replace("PY", json.dumps(sys.executable)).replace("NAME", name)
        (skill / "run.yaml").write_text(text)
    for name, text in (("fanout", FANOUT_YAML), ("pair", PAIR_YAML)):
        skill = root / "skills" / name
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(SKILL.format(name=name))
        (skill / "run.yaml").write_text(text.replace("PY", json.dumps(sys.executable)))
    if exclusive:
        (root / "proctor.toml").write_text("[workspace]\nexclusive_commands = true\n")
    return root


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    return env | {"PROCTOR_HOME": str(root / ".home")}


def _together(root: Path, *skills: str, extra: tuple[str, ...] = ()) -> list[dict[str, object]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "proctor", "run", skill, "--json", *extra],
            cwd=root,
            env=_env(root),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for skill in skills
    ]
    docs = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, (out, err)
        docs.append(json.loads(out))
    return docs


def _spans(root: Path) -> list[tuple[int, int, str]]:
    lines = (root / "spans.jsonl").read_text().splitlines()
    return sorted((d["start"], d["end"], d["who"]) for d in map(json.loads, lines))


def _overlaps(spans: list[tuple[int, int, str]]) -> list[tuple[str, str]]:
    """Every pair of spans (sorted by start) where one starts before another has ended."""
    return [(a[2], b[2]) for a, b in itertools.combinations(spans, 2) if b[0] < a[1]]


def test_two_runs_commands_never_overlap_when_the_workspace_asks(tmp_path: Path) -> None:
    root = _workspace(tmp_path / "ws", exclusive=True)
    docs = _together(root, "one", "two")
    assert [d["outcome"] for d in docs] == ["completed", "completed"]
    spans = _spans(root)
    assert len(spans) == 4
    assert _overlaps(spans) == [], spans


def test_without_the_setting_the_same_runs_overlap(tmp_path: Path) -> None:
    """The control: the test above can fail (off by default, the commands interleave)."""
    root = _workspace(tmp_path / "ws", exclusive=False)
    _together(root, "one", "two")
    spans = _spans(root)
    assert len(spans) == 4
    if not _overlaps(spans):
        pytest.skip("the two runs did not happen to overlap on this loaded machine")


def test_the_runs_of_one_tree_share_the_hold(tmp_path: Path) -> None:
    """Two sibling child runs each wait for the other's command to start: both complete only
    because they share their root's hold (another tree's run would wait for them)."""
    root = _workspace(tmp_path / "ws", exclusive=True)
    (doc,) = _together(root, "fanout", extra=("-i", 'sides=["left", "right"]'))
    assert doc["outcome"] == "completed", doc
    assert (root / "left.here").exists() and (root / "right.here").exists()


def test_a_setting_that_is_not_a_boolean_is_refused(tmp_path: Path) -> None:
    root = _workspace(tmp_path / "ws", exclusive=False)
    (root / "proctor.toml").write_text('[workspace]\nexclusive_commands = "yes"\n')
    out = subprocess.run(
        [sys.executable, "-m", "proctor", "run", "one", "--json"],
        cwd=root, env=_env(root), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode != 0
    assert "exclusive_commands" in out.stdout + out.stderr
    assert not (root / "spans.jsonl").exists()

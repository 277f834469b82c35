"""fs.search patterns run on RE2: linear time whatever the pattern, and a clear refusal for
what RE2 does not support.

The attack: a catastrophic-backtracking pattern, ``(a+)+$``, against a 50 KB line of ``a``
ending in ``!``. A backtracking engine takes exponential time on it (Python's ``re`` would not
finish); RE2 answers at once. The run is a real ``proctor run`` in a subprocess whose deadline
is the only clock in the test: it must return, and say the line does not match.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.errors import RefusedCall
from tests.runtime.driver_support import make_skill, make_workspace
from tests.runtime.tools.test_fs_support import Env
from tests.runtime.tools.test_fs_support import env as env  # fixture re-export

REPO = Path(__file__).resolve().parents[3]

SEARCH = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: find
        tool: fs.search
        inputs: {pattern: "(a+)+$", regex: true, path: hay}
"""


def test_a_catastrophic_pattern_returns(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "finder", SEARCH)
    (root / "hay").mkdir()
    (root / "hay" / "line.txt").write_text("a" * 50_000 + "!\n", encoding="utf-8")
    (root / "hay" / "match.txt").write_text("xx aaa\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "proctor", "run", "finder", "--json"],
        cwd=root,
        env={"PROCTOR_HOME": str(root / ".home"), "PYTHONPATH": str(REPO / "src")},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    envelope = json.loads(done.stdout)
    assert envelope["outcome"] == "completed", done.stderr
    results = envelope["result"]["results"]
    assert [(r["path"], r["line"]) for r in results] == [("hay/match.txt", 1)]


@pytest.mark.parametrize(
    "pattern",
    [
        r"(a)\1",  # a backreference
        r"(?=a)b",  # look-ahead
        r"(?<!a)b",  # look-behind
        "(",  # not a pattern at all
        "a{1001}",  # over RE2's repetition limit
    ],
)
def test_what_re2_cannot_run_is_refused_invalid_pattern(env: Env, pattern: str) -> None:
    with pytest.raises(RefusedCall) as info:
        env.call("fs.search", {"pattern": pattern, "regex": True})
    assert info.value.code == "invalid_pattern"
    assert "RE2" in info.value.message


def test_literal_and_caseless_patterns(env: Env) -> None:
    env.write("notes.md", "Price: 3.50 (approx)\nprice 3x50\n")
    literal = env.call("fs.search", {"pattern": "3.50 (approx)"})
    assert [r["line"] for r in literal["results"]] == [1]
    caseless = env.call("fs.search", {"pattern": "PRICE", "case_sensitive": False})
    assert [r["line"] for r in caseless["results"]] == [1, 2]
    regex = env.call("fs.search", {"pattern": r"3.50", "regex": True})
    assert [r["line"] for r in regex["results"]] == [1, 2]
    unicode = env.call("fs.search", {"pattern": r"^pr\w+ \d", "regex": True})
    assert [r["line"] for r in unicode["results"]] == [2]

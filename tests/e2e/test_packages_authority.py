"""The ``packages`` authority end to end: every run of a tree must be a package its patterns
cover, decided by the package's identity (where it came from), never by the name it gives
itself.

Each refusal proves the refused run did nothing: its file is never written.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import Ws

PARENT = """\
minimum_proctor: 0.1.0
methods:
  main:
    description: Write a line, then ask the child to write its own.
    steps:
      - id: mine
        tool: fs.write
        inputs: {path: parent.txt, content: "parent\\n", create: true}
      - id: child
        skill: ../child
    result_from: [mine]
"""

CHILD = """\
minimum_proctor: 0.1.0
methods:
  main:
    description: Write a line.
    steps:
      - id: write
        tool: fs.write
        inputs: {path: child.txt, content: "child\\n", create: true}
    result_from: [write]
"""


def _package(ws: Ws, folder: str, name: str, run_yaml: str) -> None:
    root = ws.root / "skills" / folder
    root.mkdir(parents=True)
    # both call themselves "weather", the name of a core skill: the name decides nothing
    (root / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A test package.\n---\n")
    (root / "run.yaml").write_text(run_yaml)


@pytest.fixture
def tree(ws: Ws) -> Ws:
    _package(ws, "parent", "weather", PARENT)
    _package(ws, "child", "weather", CHILD)
    return ws


def _run(ws: Ws, packages: list[str]) -> dict[str, object]:
    authority = json.dumps({"packages": packages})
    out = ws.proctor("run", "skills/parent", "--run-authority", authority, "--json")
    assert out.stdout, out.stderr
    assert "Traceback" not in out.stderr
    doc: dict[str, object] = out.json()
    return doc


def test_a_root_its_patterns_do_not_cover_is_refused_before_its_first_step(tree: Ws) -> None:
    doc = _run(tree, ["core:*", "acme/*"])  # the package calls itself weather: no matter
    assert doc["outcome"] == "blocked" and doc["seal_reason"] == "admission_refused"
    refusal = doc["refusal"]
    assert isinstance(refusal, dict) and refusal["code"] == "package_not_allowed"
    assert "local:skills/parent" in refusal["message"]
    assert not (tree.root / "parent.txt").exists()
    assert not (tree.root / "child.txt").exists()


def test_a_child_its_patterns_do_not_cover_is_refused_and_writes_nothing(tree: Ws) -> None:
    doc = _run(tree, ["local:skills/parent"])
    assert doc["outcome"] != "completed"
    assert (tree.root / "parent.txt").read_text() == "parent\n"
    assert not (tree.root / "child.txt").exists()
    verified = tree.proctor("verify", str(doc["receipt_id"]), "--json")
    assert (
        "package_not_allowed"
        in verified.stdout + tree.proctor("history", str(doc["run_id"]), "--json").stdout
    )


def test_a_pattern_covering_the_tree_lets_it_run(tree: Ws) -> None:
    doc = _run(tree, ["local:skills/*"])
    assert doc["outcome"] == "completed", doc
    assert (tree.root / "parent.txt").read_text() == "parent\n"
    assert (tree.root / "child.txt").read_text() == "child\n"


def test_an_empty_list_covers_nothing_and_a_bad_pattern_is_refused_unchanged(tree: Ws) -> None:
    doc = _run(tree, [])
    assert doc["seal_reason"] == "admission_refused"
    for bad in (["../x"], ["local:../x"], ["nothing:x"], [7], "acme/*"):
        out = tree.proctor(
            "run", "skills/parent", "--run-authority", json.dumps({"packages": bad}), "--json"
        )
        assert out.code == 2 and "authority_invalid" in out.stdout + out.stderr, out
        assert "Traceback" not in out.stderr
    assert not (tree.root / "parent.txt").exists()

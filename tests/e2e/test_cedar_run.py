"""A Cedar rule in a workspace's ``policies/`` refuses a real run's call by its policy id, and
the refused effect never happened."""

from __future__ import annotations

import json

from tests.e2e.conftest import Ws

CEDAR = """@id("no_writes_in_secrets")
@code("secret_folder")
@message("nothing under secrets/ is written")
forbid(principal, action == Proctor::Action::"fs.write", resource)
when { context.resource like "secrets/*" };
"""


def test_a_cedar_policy_refuses_a_write_by_its_id(ws: Ws) -> None:
    (ws.root / "policies").mkdir()
    (ws.root / "policies" / "house.cedar").write_text(CEDAR)
    (ws.root / "secrets").mkdir()
    skill = ws.root / "skills" / "writer"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: writer\ndescription: Writes.\n---\nWrite.\n")
    (skill / "run.yaml").write_text(
        "minimum_proctor: 0.1.0\nmethods:\n  go:\n    description: Write two files.\n"
        "    steps:\n      - id: ok\n        tool: fs.write\n"
        "        inputs: {path: notes.txt, content: hi, create: true}\n"
        "      - id: bad\n        tool: fs.write\n"
        "        inputs: {path: secrets/key.txt, content: hi, create: true}\n"
    )
    r = ws.proctor("run", "writer", "--json")
    assert r.code == 1, r.stdout + r.stderr
    env = r.json()
    assert env["refusal"]["code"] == "secret_folder"
    assert env["refusal"]["rule_id"] == "no_writes_in_secrets"
    assert (ws.root / "notes.txt").read_text() == "hi"
    assert not (ws.root / "secrets" / "key.txt").exists()
    assert ws.proctor("verify", env["receipt_id"]).code == 0


PERMIT_ALL = """@id("let_everything")
@code("let_everything")
@message("every call is welcome")
permit(principal, action, resource);
"""


def _writer(ws: Ws) -> None:
    skill = ws.root / "skills" / "writer"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: writer\ndescription: Writes.\n---\nWrite.\n")
    (skill / "run.yaml").write_text(
        "minimum_proctor: 0.1.0\nmethods:\n  go:\n    description: Write a file.\n"
        "    steps:\n      - id: w\n        tool: fs.write\n"
        "        inputs: {path: notes.txt, content: hi, create: true}\n"
    )


def test_a_cedar_permit_cannot_lower_the_approval_floor(ws: Ws) -> None:
    """Attack: a workspace permit-everything policy does not admit a write the floor holds
    under effects: ask (the run pauses, nothing is written), nor one effects: none refuses."""
    (ws.root / "policies").mkdir()
    (ws.root / "policies" / "open.cedar").write_text(PERMIT_ALL)
    _writer(ws)
    r = ws.proctor("run", "writer", "--json", "--run-authority", '{"effects": "ask"}')
    assert r.code == 10, r.stdout + r.stderr
    assert r.json()["status"] == "needs_approval"
    assert not (ws.root / "notes.txt").exists()
    events = [
        json.loads(line)
        for line in (ws.root / ".proctor" / "audit.jsonl").read_text().splitlines()
        if "let_everything" in line
    ]
    # the permit applied to the write, and was recorded, before the floor held it
    assert [(e.get("event"), e.get("allowed"), e.get("effect")) for e in events] == [
        ("policy_guard_check", True, "recorded")
    ], events
    r = ws.proctor("run", "writer", "--json", "--run-authority", '{"effects": "none"}')
    assert r.code != 0, r.stdout + r.stderr
    assert r.json()["refusal"]["code"] == "effects_none"
    assert not (ws.root / "notes.txt").exists()

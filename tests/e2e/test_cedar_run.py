"""A Cedar rule in a workspace's ``policies/`` refuses a real run's call by its policy id, and
the refused effect never happened."""

from __future__ import annotations

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

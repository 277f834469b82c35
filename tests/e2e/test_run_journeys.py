"""A newcomer's journeys through ``proctor run``, ``history``, ``verify``, ``audit`` and ``check``.

Every refusal test proves the refused effect did not happen: the workspace's files are compared
byte for byte before and after.
"""

from __future__ import annotations

import json

from tests.e2e.conftest import REPO, Ws


def audit_lines(ws: Ws) -> list[dict[str, object]]:
    path = ws.root / ".proctor" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_hello_world_completes_with_a_receipt_that_verifies(ws: Ws) -> None:
    r = ws.proctor("run", str(REPO / "examples/hello-world"), "-i", "message=hello", "--json")
    assert r.code == 0, r.stderr
    env = r.json()
    assert env["schema"] == "proctor.run.v1"
    assert (env["status"], env["outcome"]) == ("sealed", "completed")
    assert env["result"]["greet"] == {"text": "hello"}
    assert env["result"]["record"]["digest"].startswith("sha256:")
    verified = ws.proctor("verify", env["receipt_id"], "--json")
    assert verified.code == 0, verified.stdout + verified.stderr
    assert verified.json()["status"] == "verified"
    # the audit chain holds and records the run from start to seal
    assert ws.proctor("audit", "verify").code == 0
    events = [line["event"] for line in audit_lines(ws)]
    assert events[0] == "run_started" and events[-1] == "run_sealed"
    assert events.count("tool_call") == 2
    # history lists the run and its receipts
    listed = ws.proctor("history", "--json").json()["runs"]
    assert listed[0]["run_id"] == env["run_id"]
    assert listed[0]["receipt_id"] == env["receipt_id"]
    one = ws.proctor("history", env["run_id"], "--json").json()
    kinds = sorted(rec["kind"] for rec in one["receipts"])
    assert kinds == ["call", "call", "run", "step", "step"]


def test_human_output_is_a_readable_summary(ws: Ws) -> None:
    r = ws.proctor("run", str(REPO / "examples/hello-world"), "-i", "message=hi")
    assert r.code == 0
    assert "completed" in r.stdout and "receipt: sha256:" in r.stdout


def test_runs_are_found_from_any_folder_of_the_workspace(ws: Ws) -> None:
    env = ws.proctor("run", str(REPO / "examples/hello-world"), "-i", "message=x", "--json").json()
    sub = ws.root / "deep" / "er"
    sub.mkdir(parents=True)
    one = ws.proctor("history", env["run_id"], "--json", cwd=sub)
    assert one.code == 0 and one.json()["run_id"] == env["run_id"]


def test_edit_reads_then_changes_a_file_bound_to_its_digest(ws: Ws) -> None:
    ws.add_example("notes-editor")
    (ws.root / "notes.md").write_text("Hello wrld\n")
    r = ws.proctor(
        "run",
        "notes-editor#edit",
        "-i",
        "file=notes.md",
        "-i",
        "old=wrld",
        "-i",
        "new=world",
        "--json",
    )
    assert r.code == 0, r.stdout + r.stderr
    assert (ws.root / "notes.md").read_text() == "Hello world\n"
    env = r.json()
    assert env["result"]["reread"]["content"] == "Hello world\n"
    assert set(env["result"]) == {"edit", "reread"}
    assert ws.proctor("verify", env["receipt_id"]).code == 0


def test_sensitive_file_is_refused_and_its_secret_reaches_no_output(ws: Ws) -> None:
    ws.add_example("notes-editor")
    canary = "canary-" + "7f3a9c" * 4
    (ws.root / ".env").write_text(f"API_TOKEN={canary}\n")
    before = ws.snapshot()
    r = ws.proctor("run", "notes-editor#show", "-i", "file=.env", "--json")
    assert r.code == 1
    env = r.json()
    assert env["outcome"] == "blocked"
    assert env["refusal"]["code"] == "sensitive_path"
    assert env["refusal"]["step"] == "read"
    assert ws.snapshot() == before
    refused = [e for e in audit_lines(ws) if e["event"] == "call_refused"]
    assert refused and refused[0]["code"] == "sensitive_path"
    for blob in (r.stdout, r.stderr, ws.state_bytes().decode("utf-8", "replace")):
        assert canary not in blob


def test_traversal_outside_the_workspace_is_refused(ws: Ws) -> None:
    ws.add_example("notes-editor")
    outside = ws.root.parent / "outside.txt"
    outside.write_text("not yours\n")
    (ws.root / "link").symlink_to(outside)
    for path in ("../outside.txt", str(outside), "link"):
        r = ws.proctor("run", "notes-editor#show", "-i", f"file={path}", "--json")
        assert r.code == 1, path
        assert r.json()["refusal"]["code"] in {"path_outside_workspace", "path_absolute"}, path
        assert str(ws.root.parent) not in r.stdout  # never a host path


def test_publish_never_overwrites_and_never_writes_authority_files(ws: Ws) -> None:
    skill = ws.add_example("notes-editor")
    (ws.root / "a.md").write_text("A\n")
    (ws.root / "b.md").write_text("B\n")
    (ws.root / "policies").mkdir()
    for target, code in (
        ("b.md", None),
        ("skills/notes-editor/run.yaml", "authority_file"),
        ("policies/evil.yaml", "authority_file"),
        (".proctor/x", "sensitive_path"),
    ):
        before = ws.snapshot()
        r = ws.proctor(
            "run", "notes-editor#publish", "-i", "source=a.md", "-i", f"target={target}", "--json"
        )
        assert r.code == 1, (target, r.stdout)
        refusal = r.json()["refusal"]
        if code is not None:
            assert refusal["code"] == code, (target, refusal)
        assert ws.snapshot() == before, target
    assert (skill / "run.yaml").read_bytes() == (
        REPO / "examples/notes-editor/run.yaml"
    ).read_bytes()


def test_stale_digest_edit_is_refused_and_changes_nothing(ws: Ws) -> None:
    ws.add_example("notes-editor")
    (ws.root / "n.md").write_text("one two\n")
    r = ws.proctor(
        "run", "notes-editor#edit", "-i", "file=n.md", "-i", "old=three", "-i", "new=3", "--json"
    )
    assert r.code == 1
    assert r.json()["refusal"]["code"] == "edit_no_match"
    assert (ws.root / "n.md").read_text() == "one two\n"


def test_bad_inputs_seal_a_blocked_receipt_without_echoing_the_value(ws: Ws) -> None:
    secret = "sk-not-echoed-" + "q" * 20
    r = ws.proctor(
        "run",
        str(REPO / "examples/hello-world"),
        "--inputs",
        "-",
        "--json",
        stdin=json.dumps({"message": 42, "extra": secret}),
    )
    assert r.code == 1, r.stdout + r.stderr
    env = r.json()
    assert env["outcome"] == "blocked"
    assert env["refusal"]["code"] == "inputs_invalid"
    assert env["receipt_id"] and ws.proctor("verify", env["receipt_id"]).code == 0
    assert secret not in r.stdout + r.stderr
    assert secret not in ws.state_bytes().decode("utf-8", "replace")


def test_inputs_document_that_is_not_json_is_a_usage_error_never_echoed(ws: Ws) -> None:
    secret = "hunter2-not-echoed-value"
    r = ws.proctor("run", str(REPO / "examples/hello-world"), "--inputs", "-", stdin="{" + secret)
    assert r.code == 2
    assert secret not in r.stdout + r.stderr
    assert "error[" in r.stderr


def test_unknown_method_and_missing_package_are_usage_errors(ws: Ws) -> None:
    r = ws.proctor("run", str(REPO / "examples/hello-world") + "#nope")
    assert r.code == 2 and "greet" in r.stderr
    r = ws.proctor("run", "no-such-skill")
    assert r.code == 2 and "skill_not_found" in r.stderr
    lone = ws.root / "lone.md"
    lone.write_text("---\nname: x\ndescription: y\n---\n")
    r = ws.proctor("run", "lone.md")
    assert r.code == 2 and "not_a_package" in r.stderr


def test_an_unknown_operation_is_refused_before_any_step_runs(ws: Ws) -> None:
    skill = ws.root / "skills" / "asker"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: asker\ndescription: Asks.\n---\nBody\n")
    (skill / "run.yaml").write_text(
        "minimum_proctor: 0.1.0\nmethods:\n  go:\n    description: Write then ask.\n"
        "    steps:\n      - id: w\n        tool: fs.write\n"
        "        inputs: {path: out.txt, content: hi, create: true}\n"
        "      - id: q\n        operation: tracker/issue.read\n"
    )
    r = ws.proctor("run", "asker", "--json")
    assert r.code == 1
    assert r.json()["refusal"]["code"] == "tool_unknown"
    assert not (ws.root / "out.txt").exists()


def test_newer_minimum_proctor_is_refused_by_name(ws: Ws) -> None:
    skill = ws.root / "skills" / "future"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: future\ndescription: From the future.\n---\n")
    (skill / "run.yaml").write_text("minimum_proctor: 9.0.0\nmethods: {}\nbogus: 1\n")
    r = ws.proctor("run", "future")
    assert r.code == 2
    assert "9.0.0" in r.stderr and "proctor_too_old" not in r.stdout


def test_check_passes_on_a_workspace_and_fails_when_it_examined_nothing(ws: Ws) -> None:
    empty = ws.proctor("check", "--json")
    assert empty.code == 1
    assert empty.json()["passed"] is False  # no skill found: nothing was examined
    ws.add_example("notes-editor")
    r = ws.proctor("check", "--json")
    assert r.code == 0, r.stdout
    names = {c["name"] for p in r.json()["phases"] for c in p["checks"]}
    assert {"skills", "policy_load", "guard_bindings", "tool_schemas"} <= names


def test_check_refuses_a_malformed_directive_by_name(ws: Ws) -> None:
    ws.add_example("notes-editor")
    folder = ws.root / "directives"
    folder.mkdir()
    (folder / "mismatch.md").write_text(
        "---\nid: other\ndescription: Says another id.\ntools: [read_file]\ncategory: system\n"
        "---\nBody\n"
    )
    r = ws.proctor("check", "--json")
    assert r.code == 1, r.stdout
    checks = {c["name"]: c for p in r.json()["phases"] for c in p["checks"]}
    found = checks["directives"]["findings"]
    assert not checks["directives"]["passed"]
    assert [f["path"] for f in found] == ["directives/mismatch.md"]
    (folder / "mismatch.md").unlink()
    assert ws.proctor("check", "--json").code == 0

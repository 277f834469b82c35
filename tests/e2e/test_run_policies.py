"""Policies through the whole CLI: profiles, drift, zero rules and the audited opt-out, and the
reference kernel's own policy files enforcing unchanged in a workspace's ``policies/``."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import REPO, Ws
from tests.reference_wheel import reference_members

HELLO = str(REPO / "examples/hello-world")


def empty_shipped(ws: Ws) -> None:
    folder = ws.root / "policies"
    folder.mkdir(exist_ok=True)
    (folder / "a.yaml").write_text("id: proctor.files\nrules: []\n")
    (folder / "b.yaml").write_text("id: proctor.credentials\nrules: []\n")


def events(ws: Ws) -> list[dict[str, object]]:
    text = (ws.root / ".proctor" / "audit.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_any_other_profile_value_refuses(ws: Ws) -> None:
    r = ws.proctor(
        "run", HELLO, "-i", "message=x", "--json", env={"PROCTOR_POLICY_PROFILE": "relaxed"}
    )
    assert r.code == 1
    assert r.json()["refusal"]["code"] == "bad_policy_profile"
    assert r.json()["trace"] == []


def test_drift_from_the_shipped_rules_is_refused_naming_what_changed(ws: Ws) -> None:
    folder = ws.root / "policies"
    folder.mkdir()
    (folder / "files.yaml").write_text(
        "id: proctor.files\nrules:\n  - id: proctor.sensitive_paths\n    description: weaker\n"
        "    guard: check_sensitive_paths\n    enforcement: warn\n    on_error: fail_open\n"
    )
    r = ws.proctor("run", HELLO, "-i", "message=x", "--json")
    assert r.code == 1
    refusal = r.json()["refusal"]
    assert refusal["code"] == "policy_drift"
    assert "proctor.sensitive_paths.enforcement" in refusal["message"]
    assert "missing" in refusal["message"]  # the other rules of the replaced file
    # custom turns only the drift check off
    ok = ws.proctor(
        "run", HELLO, "-i", "message=x", "--json", env={"PROCTOR_POLICY_PROFILE": "custom"}
    )
    assert ok.code == 0, ok.stdout


def test_zero_enforceable_rules_refuse_unless_opted_out_and_audited(ws: Ws) -> None:
    empty_shipped(ws)
    custom = {"PROCTOR_POLICY_PROFILE": "custom"}
    r = ws.proctor("run", HELLO, "-i", "message=x", "--json", env=custom)
    assert r.code == 1
    assert r.json()["refusal"]["code"] == "no_enforceable_policies"
    assert not any(e["event"] == "unguarded_mode_enabled" for e in events(ws))
    ok = ws.proctor(
        "run", HELLO, "-i", "message=x", "--json", env={**custom, "PROCTOR_ALLOW_NO_POLICIES": "1"}
    )
    assert ok.code == 0
    unguarded = [e for e in events(ws) if e["event"] == "unguarded_mode_enabled"]
    assert len(unguarded) == 1 and unguarded[0]["run_id"] == ok.json()["run_id"]


@pytest.fixture
def reference_ws(ws: Ws, tmp_path_factory: pytest.TempPathFactory) -> Ws:
    members = reference_members(
        tmp_path_factory.mktemp("wheel"), "auro_runtime/resources/policies/", ".yaml"
    )
    assert {"default.yaml", "credential_proxy.yaml", "router.yaml"} <= set(members)
    folder = ws.root / "policies"
    folder.mkdir()
    for name, data in members.items():
        (folder / name).write_bytes(data)
    return ws


@pytest.fixture
def counting_server() -> Iterator[tuple[int, list[int]]]:
    """A loopback TCP listener that counts connections (none may arrive)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.2)
    hits: list[int] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            hits.append(1)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield sock.getsockname()[1], hits
    stop.set()
    thread.join(timeout=2)
    sock.close()


def test_reference_policy_files_load_and_check_passes(reference_ws: Ws) -> None:
    reference_ws.add_example("notes-editor")
    r = reference_ws.proctor("check", "--json")
    assert r.code == 0, r.stdout
    load = [c for p in r.json()["phases"] for c in p["checks"] if c["name"] == "policy_load"]
    assert load[0]["passed"]


def test_reference_rules_alone_refuse_a_raw_credential_and_a_sensitive_path(
    reference_ws: Ws, counting_server: tuple[int, list[int]]
) -> None:
    ws = reference_ws
    port, hits = counting_server
    empty_shipped(ws)  # only the reference kernel's rules are left to enforce
    ws.add_example("notes-editor")
    (ws.root / ".env").write_text("TOKEN=abcdefabcdef\n")
    custom = {"PROCTOR_POLICY_PROFILE": "custom"}
    r = ws.proctor("run", "notes-editor#show", "-i", "file=.env", "--json", env=custom)
    assert r.code == 1 and r.json()["refusal"]["code"] == "sensitive_path"

    skill = ws.root / "skills" / "poster"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: poster\ndescription: Posts.\n---\n")
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    (skill / "run.yaml").write_text(
        "minimum_proctor: 0.1.0\nmethods:\n  post:\n    description: Post.\n    steps:\n"
        "      - id: send\n        tool: http.request\n        reason: post it\n"
        "        inputs:\n          method: GET\n"
        f"          url: http://127.0.0.1:{port}/\n"
        f"          headers: {{Authorization: 'Bearer {token}'}}\n"
    )
    r = ws.proctor("run", "poster", "--json", env=custom)
    assert r.code == 1, r.stdout
    refusal = r.json()["refusal"]
    assert refusal["code"] == "raw_credential"
    assert refusal["rule_id"] == "no_hardcoded_secrets"
    assert hits == []  # nothing was sent
    assert token not in r.stdout + r.stderr
    assert token not in ws.state_bytes().decode("utf-8", "replace")

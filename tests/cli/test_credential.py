"""``proctor credential``: material only on stdin, never echoed, listing without material."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CANARY = "canary-5d1f8e2b9a7c3064"


def _proctor(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PROCTOR_HOME": str(tmp_path / "home")}
    env.pop("PROCTOR_SECRET_BACKEND", None)
    (tmp_path / "ws" / ".proctor").mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "proctor", "credential", *args],
        input=stdin, capture_output=True, text=True, env=env, cwd=tmp_path / "ws", timeout=60,
    )  # fmt: skip


def test_set_list_bind_remove(tmp_path: Path) -> None:
    done = _proctor(tmp_path, "set", "tracker", "--profile", "work", "--auth-mode", "api_key",
                    "--from-stdin", stdin=CANARY + "\n")  # fmt: skip
    assert done.returncode == 0, done.stderr
    listed = _proctor(tmp_path, "list", "--json")
    assert json.loads(listed.stdout) == {"schema": "proctor.credential_list.v1", "profiles": [{
        "profile": "work", "provider": "tracker", "auth_mode": "api_key", "audience": None,
        "backend": "file", "default": True, "packages": []}]}  # fmt: skip
    assert _proctor(tmp_path, "bind", "work", "--provider", "tracker").returncode == 0
    assert (
        _proctor(tmp_path, "bind", "work", "--skill", "triage", "--credential", "t").returncode == 0
    )
    bindings = json.loads((tmp_path / "ws" / ".proctor" / "credentials.json").read_text())
    assert bindings == {"providers": {"tracker": "work"}, "skills": {"triage": {"t": "work"}}}
    wrong = _proctor(tmp_path, "bind", "work", "--provider", "other")
    assert wrong.returncode != 0 and "credential_provider_mismatch" in wrong.stderr
    assert _proctor(tmp_path, "remove", "work").returncode == 0
    assert json.loads(_proctor(tmp_path, "list", "--json").stdout) == {
        "schema": "proctor.credential_list.v1",
        "profiles": [],
    }
    everything = b"".join(p.read_bytes() for p in (tmp_path).rglob("*") if p.is_file())
    assert CANARY.encode() not in everything


def test_bind_a_profile_to_a_package_identity(tmp_path: Path) -> None:
    done = _proctor(tmp_path, "set", "tracker", "--profile", "work", "--from-stdin",
                    stdin=CANARY)  # fmt: skip
    assert done.returncode == 0, done.stderr
    # no terminal to confirm on: refused, with the --yes command, and nothing is bound
    asked = _proctor(tmp_path, "bind", "work", "local:skills/triage")
    assert asked.returncode != 0 and "terminal_required" in asked.stderr
    assert "bind work local:skills/triage --yes" in asked.stderr
    hidden = _proctor(tmp_path, "bind", "work", "local:skills/tri\u202eage", "--yes")
    assert hidden.returncode != 0 and "credential_identity_invalid" in hidden.stderr
    assert json.loads(_proctor(tmp_path, "list", "--json").stdout)["profiles"][0]["packages"] == []
    bad = _proctor(tmp_path, "bind", "work", CANARY, "--yes")
    assert bad.returncode != 0 and "credential_identity_invalid" in bad.stderr
    assert CANARY not in bad.stdout + bad.stderr
    unknown = _proctor(tmp_path, "bind", "nobody", "local:skills/triage", "--yes")
    assert "credential_profile_unknown" in unknown.stderr
    for _ in range(2):  # binding again changes nothing
        yes = _proctor(tmp_path, "bind", "work", "local:skills/triage", "--yes")
        assert yes.returncode == 0, yes.stderr
        assert "local:skills/triage" in yes.stderr and "any host" in yes.stderr
    listed = json.loads(_proctor(tmp_path, "list", "--json").stdout)["profiles"]
    assert listed[0]["packages"] == ["local:skills/triage"]
    both = _proctor(tmp_path, "bind", "work", "local:x", "--provider", "tracker")
    assert both.returncode != 0 and "usage_error" in both.stderr


def test_secret_on_argv_is_refused_and_not_echoed(tmp_path: Path) -> None:
    for args in (
        ["set", "tracker", "--profile", "work", CANARY],
        ["set", "tracker", "--profile", "work", f"--value={CANARY}"],
        ["set", "tracker", "--profile", "work", "--secret", CANARY, "--from-stdin"],
        ["list", CANARY],
    ):
        done = _proctor(tmp_path, *args, stdin="x")
        assert done.returncode == 2, (args, done.stderr)
        assert "--from-stdin" in done.stderr
        assert CANARY not in done.stdout + done.stderr
    assert not (tmp_path / "home" / "config.json").exists()


def test_set_without_from_stdin_is_refused(tmp_path: Path) -> None:
    done = _proctor(tmp_path, "set", "tracker", "--profile", "work", stdin=CANARY)
    assert done.returncode == 2 and "secret_needs_stdin" in done.stderr
    assert not (tmp_path / "home").exists()

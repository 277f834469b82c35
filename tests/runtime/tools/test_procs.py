"""process.*: long-lived programs under a supervisor, in the sandbox, stopped whole."""

from __future__ import annotations

import json
import secrets
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from click.testing import CliRunner

from proctor.cli.main import cli
from proctor.errors import RefusedCall
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.home.credentials.model import ResolvedCredential, Secret
from proctor.runtime.records.sqlite import SQLiteRunStore
from proctor.runtime.tools.base import ToolContext
from proctor.runtime.tools.command import PROCESS_EXTRA, ProcessContext
from proctor.runtime.tools.procs_log import list_processes, stop
from tests.runtime.boundary.sandbox_support import needs_bwrap
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)
from tests.runtime.tools.test_fs_support import call

pytestmark = needs_bwrap
PY = sys.executable
CANARY = "canary-7f3c19d2e8a4b605"


def _wait(check: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        time.sleep(0.02)


def _alive(marker: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.info["status"] != psutil.STATUS_ZOMBIE and any(
            marker in a for a in (p.info["cmdline"] or [])
        ):
            found.append(p)
    return found


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Path]:
    root = make_workspace(tmp_path / "ws")
    yield root
    for info in list_processes(root / ".proctor" / "processes"):
        if info["running"]:
            stop(root / ".proctor" / "processes" / info["process_id"])


@pytest.fixture
def ctx(ws: Path) -> Iterator[ToolContext]:
    store = SQLiteRunStore(ws / ".proctor" / "runs.sqlite")
    try:
        yield ToolContext(workspace=Workspace(ws), store=store, run_id="run-1", call_id="c-1")
    finally:
        store.close()


def _output(ctx: ToolContext, process_id: str, want: str) -> str:
    text = ""

    def seen() -> bool:
        nonlocal text
        out = call(ctx, "process.read", {"process_id": process_id})
        text = "".join(e["text"] for e in out["entries"])
        return want in text

    _wait(seen)
    return text


def test_stop_leaves_no_process_of_its_tree(ctx: ToolContext) -> None:
    marker = f"proctor-proc-{secrets.token_hex(6)}"
    script = (
        "import os, subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(300)',"
        f" '{marker}'])\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(300)',"
        f" '{marker}'])\n"
        "    os._exit(0)\n"
        "print('started', flush=True)\n"
        "time.sleep(300)\n"
    )
    out = call(ctx, "process.start", {"command": PY, "args": ["-c", script, marker]})
    assert out["schema"] == "proctor.process.v1" and out["running"]
    assert out["sandbox"] == "bubblewrap"
    _output(ctx, out["process_id"], "started")
    _wait(lambda: len(_alive(marker)) >= 3)
    stopped = call(ctx, "process.stop", {"process_id": out["process_id"]})
    assert stopped["running"] is False and stopped["stopped"] == "stopped"
    _wait(lambda: not _alive(marker), 10)


def test_output_is_tagged_read_by_cursor_and_input_reaches_stdin(ctx: ToolContext) -> None:
    script = (
        "import sys\nprint('out line', flush=True)\nprint('err line', file=sys.stderr, flush=True)"
        "\nfor line in sys.stdin:\n    print('got', line.strip(), flush=True)\n"
    )
    out = call(ctx, "process.start", {"command": PY, "args": ["-c", script]})
    pid = out["process_id"]
    _output(ctx, pid, "out line")
    first = call(ctx, "process.read", {"process_id": pid})
    streams = {e["stream"] for e in first["entries"]}

    def both() -> bool:
        entries = call(ctx, "process.read", {"process_id": pid})["entries"]
        return {"stdout", "stderr"} <= {e["stream"] for e in entries}

    _wait(both)
    assert "stdout" in streams
    cursor = call(ctx, "process.read", {"process_id": pid})["next_cursor"]
    ctx.call_id = "c-2"
    call(ctx, "process.write", {"process_id": pid, "input": "hello\n"})
    call(ctx, "process.write", {"process_id": pid, "input": "hello\n"})  # resent: applied once
    ctx.call_id = "c-3"
    call(ctx, "process.write", {"process_id": pid, "input": "bye\n"})
    text = _output(ctx, pid, "got bye")
    assert text.count("got hello") == 1
    later = call(ctx, "process.read", {"process_id": pid, "after": cursor})
    assert "".join(e["text"] for e in later["entries"]) == "got hello\ngot bye\n"
    listed = call(ctx, "process.list", {})["processes"]
    assert [p["process_id"] for p in listed] == [pid] and listed[0]["running"]


def test_a_delivered_secret_never_reaches_process_read_or_the_log(ctx: ToolContext) -> None:
    cred = ResolvedCredential("api", "api", "api_key", "API_TOKEN", "env", None, None,
                              Secret(CANARY))  # fmt: skip
    ctx.extras[PROCESS_EXTRA] = ProcessContext(credentials={"api": cred})
    script = "import os\nprint('token is', os.environ['API_TOKEN'], flush=True)\n"
    out = call(ctx, "process.start", {"command": PY, "args": ["-c", script]})
    text = _output(ctx, out["process_id"], "token is")
    assert CANARY not in text and "[REDACTED]" in text
    folder = ctx.workspace.root / ".proctor" / "processes" / out["process_id"]
    for path in folder.iterdir():
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path.name


def test_a_terminal_and_max_seconds(ctx: ToolContext) -> None:
    script = (
        "import os, sys, time\n"
        "print('tty', os.isatty(1), os.get_terminal_size(1).columns, flush=True)\n"
        "time.sleep(300)\n"
    )
    out = call(
        ctx,
        "process.start",
        {"command": PY, "args": ["-c", script], "tty": {"rows": 30, "cols": 97}, "max_seconds": 2},
    )
    text = _output(ctx, out["process_id"], "tty")
    assert "tty True 97" in text
    read = call(ctx, "process.read", {"process_id": out["process_id"]})
    assert read["entries"][0]["stream"] == "terminal"
    _wait(lambda: not call(ctx, "process.list", {})["processes"][0]["running"])
    assert call(ctx, "process.list", {})["processes"][0]["stopped"] == "max_seconds"


def test_another_run_cannot_reach_a_process_and_reserved_env_is_refused(
    ctx: ToolContext, ws: Path
) -> None:
    out = call(ctx, "process.start", {"command": PY, "args": ["-c", "input()"]})
    other = ToolContext(workspace=ctx.workspace, store=ctx.store, run_id="run-2", call_id="x")
    for tool in ("process.read", "process.stop"):
        with pytest.raises(RefusedCall) as caught:
            call(other, tool, {"process_id": out["process_id"]})
        assert caught.value.code == "process_unknown"
    assert call(other, "process.list", {}) == {"processes": []}
    with pytest.raises(RefusedCall) as caught:
        call(ctx, "process.start", {"command": PY, "env": {"PROCTOR_HOME": "/tmp"}})
    assert caught.value.code == "env_reserved"
    assert len(list_processes(ws / ".proctor" / "processes")) == 1


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


SERVER = """import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from the dev server"
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        print("served", self.path, flush=True)
print("listening", flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""
# in a sandbox of its own, the way to the dev server is the egress proxy (HTTP_PROXY), which
# dials the host's loopback, where the server's port is published
WAIT = """import sys, time, urllib.request
deadline = time.monotonic() + 20
while True:
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/ready", timeout=2).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
"""


def _run_in(ws: Path, args: list[str]) -> Any:
    import os

    here = os.getcwd()
    os.chdir(ws)
    try:
        return CliRunner().invoke(cli, args)
    finally:
        os.chdir(here)


def test_a_dev_server_started_by_a_run_answers_and_outlives_the_pause(ws: Path) -> None:
    port = _free_port()
    (ws / "tools" / "server.py").write_text(SERVER)
    (ws / "tools" / "wait_port.py").write_text(WAIT)
    (ws / "proctor.toml").write_text('[egress]\nallow = ["127.0.0.1"]\n')
    make_skill(
        ws,
        "dev",
        f"""minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: serve
        tool: process.start
        inputs: {{command: "{PY}", args: [tools/server.py, "{port}"], ports: [{port}]}}
      - id: ready
        tool: command.execute
        inputs: {{argv: ["{PY}", tools/wait_port.py, "{port}"]}}
      - id: get
        tool: http.request
        inputs: {{method: GET, url: "http://127.0.0.1:{port}/hi"}}
      - id: confirm
        ask: {{reason: Keep going?}}
""",
    )
    env = session(ws).run("dev", cwd=ws)
    assert env.status == "needs_approval", env.refusal
    listed = _run_in(ws, ["process", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    (proc,) = json.loads(listed.output)["processes"]
    assert proc["running"] and proc["run_id"] == env.run_id and proc["step_id"] == "serve"
    read = _run_in(ws, ["process", "read", proc["process_id"], "--json"])
    text = "".join(e["text"] for e in json.loads(read.output)["entries"])
    assert "listening" in text and "served /hi" in text
    s2 = session(ws)
    calls = {c.step_id: c for c in s2.store.calls(env.run_id or "")}
    got = calls["get"].result["result"]
    assert got["status"] == 200 and got["body"] == "hello from the dev server"
    stopped = _run_in(ws, ["process", "stop", proc["process_id"], "--json"])
    assert stopped.exit_code == 0 and json.loads(stopped.output)["running"] is False
    _wait(lambda: not _alive(f"{port}"), 10)


def test_fuzzed_cursors_and_ids_are_refused_cleanly(ctx: ToolContext) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from proctor.errors import ProctorError

    out = call(ctx, "process.start", {"command": PY, "args": ["-c", "print('a' * 300)"]})
    pid = out["process_id"]
    _output(ctx, pid, "a" * 300)

    @settings(max_examples=80, deadline=None)
    @given(after=st.integers(0, 400), ident=st.sampled_from([pid, "proc_" + "0" * 16, "x"]))
    def read(after: int, ident: str) -> None:
        try:
            got = call(ctx, "process.read", {"process_id": ident, "after": after})
        except ProctorError as exc:
            assert exc.code in {"cursor_invalid", "process_unknown", "schema_invalid"}
            return
        assert got["next_cursor"] >= 0

    read()


def test_the_log_is_bounded_and_says_what_it_dropped(ctx: ToolContext) -> None:
    script = "import sys\nfor i in range(10):\n    sys.stdout.write(str(i) * (1024 * 1024))\n"
    script += "sys.stdout.write('end')\n"
    out = call(ctx, "process.start", {"command": PY, "args": ["-u", "-c", script]})
    folder = ctx.workspace.root / ".proctor" / "processes" / out["process_id"]
    _wait(lambda: not call(ctx, "process.read", {"process_id": out["process_id"]})["running"])
    kept = sum(p.stat().st_size for p in folder.glob("seg-*"))
    assert kept <= 8 * 1024 * 1024 + 4096
    first = call(ctx, "process.read", {"process_id": out["process_id"], "max_bytes": 1024})
    assert first["dropped_bytes"] > 0 and first["entries"][0]["text"][0] != "0"
    cursor, text = first["next_cursor"], ""
    while True:
        page = call(
            ctx,
            "process.read",
            {"process_id": out["process_id"], "after": cursor, "max_bytes": 1024 * 1024},
        )
        text += "".join(e["text"] for e in page["entries"])
        if page["next_cursor"] == cursor:
            break
        cursor = page["next_cursor"]
    assert text.endswith("9end")


PLANT = """
import json, os, sys
home_file, key, ws = sys.argv[1:4]
try:
    got = open(home_file).read()
except OSError:
    got = "denied"
for path in (key, os.path.join(ws, "policies", "p.yaml"), os.path.join(ws, "proctor.toml")):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("planted")
with open(os.path.join(ws, "report.json"), "w") as f:
    f.write(json.dumps({"home_file": got}))
"""


def test_a_process_sees_no_home_the_session_names_and_leaves_no_authority_file(
    ws: Path,
) -> None:
    # the home and key are named only in the session's environment (the Python API), not in
    # proctor's own: the process's sandbox must be built from the session's, and what it
    # plants that a run may never write must be gone once it ends, as for a command
    import os

    home = ws / "state" / "home"
    home.mkdir(parents=True, mode=0o700)
    (home / "config.json").write_text(json.dumps({"canary": CANARY}))
    key = ws / "keys" / "signing.pem"
    assert "PROCTOR_HOME" not in os.environ and "PROCTOR_SIGNING_KEY" not in os.environ
    (ws / "tools" / "plant.py").write_text(PLANT)
    argv = ["tools/plant.py", str(home / "config.json"), str(key), str(ws)]
    make_skill(
        ws,
        "plant",
        f"""minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: serve
        tool: process.start
        inputs: {json.dumps({"command": PY, "args": argv})}
""",
    )
    s = session(
        ws,
        environ={
            "PROCTOR_HOME": str(home),
            "PROCTOR_SIGNING_KEY": str(key),
            "PROCTOR_SANDBOX": "required",
        },
    )
    env = s.run("plant", cwd=ws)
    assert env.outcome == "completed", env.refusal
    assert env.result["sandbox"] == "bubblewrap"
    processes = ws / ".proctor" / "processes"
    _wait(lambda: not list_processes(processes)[0]["running"])
    (info,) = list_processes(processes)
    assert info["exit_code"] == 0
    assert json.loads((ws / "report.json").read_text()) == {"home_file": "denied"}
    assert sorted(info["removed"]) == ["policies", "proctor.toml", "signing.pem"]
    assert not key.exists()
    assert not (ws / "policies").exists() and not (ws / "proctor.toml").exists()
    out = call_ctx_read(ws, info["process_id"], env.run_id or "")
    assert out["removed"] == info["removed"]
    assert CANARY not in json.dumps(env.to_json()) + json.dumps(out)


def call_ctx_read(ws: Path, process_id: str, run_id: str) -> dict[str, Any]:
    store = SQLiteRunStore(ws / ".proctor" / "runs.sqlite")
    try:
        ctx = ToolContext(workspace=Workspace(ws), store=store, run_id=run_id, call_id="c-r")
        return call(ctx, "process.read", {"process_id": process_id})
    finally:
        store.close()

"""An OSError inside an fs tool is a clean refusal with a code: never a traceback, never a host
path in the message, and nothing left half-written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from proctor.errors import ProctorError
from tests.runtime.tools.test_fs_support import Env, snapshot
from tests.runtime.tools.test_fs_support import env as env  # fixture re-export

REPO = Path(__file__).resolve().parents[3]


def failed(env: Env, tool: str, args: dict[str, object]) -> ProctorError:
    before = snapshot(env.root)
    with pytest.raises(ProctorError) as info:
        env.call(tool, args)
    assert str(env.root.parent) not in json.dumps(info.value.to_dict())
    assert snapshot(env.root) == before
    return info.value


def test_a_file_where_a_folder_should_be(env: Env) -> None:
    env.write("a.txt", "x\n")
    err = failed(env, "fs.write", {"path": "a.txt/b.txt", "content": "y\n", "create": True})
    assert err.code == "parent_missing"
    assert failed(env, "fs.read", {"path": "a.txt/b.txt"}).code == "not_found"


def test_a_folder_or_a_fifo_where_a_file_should_be(env: Env) -> None:
    (env.root / "d").mkdir()
    os.mkfifo(env.root / "pipe")  # opened without blocking, never read
    for path in ("d", "pipe"):
        for tool, args in [
            ("fs.read", {"path": path}),
            ("fs.edit", {"path": path, "edits": [{"old": "a", "new": "b"}]}),
        ]:
            with pytest.raises(ProctorError) as info:
                env.call(tool, args)
            assert info.value.code == "not_a_file", (tool, path)
            assert str(env.root.parent) not in json.dumps(info.value.to_dict())
    assert (env.root / "d").is_dir() and sorted(os.listdir(env.root / "d")) == []


CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys
    from pathlib import Path
    from proctor.errors import ProctorError
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.records.sqlite import SQLiteRunStore
    from proctor.runtime.tools.base import ToolContext
    from tests.runtime.tools.test_fs_support import call

    root = Path(sys.argv[1])
    store = SQLiteRunStore(root.parent / "store" / "runs.sqlite")
    ctx = ToolContext(workspace=Workspace(root), store=store, run_id="r", call_id="c")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
    out = []
    for tool, args in [
        ("fs.write", {"path": "big.txt", "content": "x" * 200_000, "create": True}),
        ("fs.write", {"path": "a.txt", "content": "x" * 200_000, "expected_digest": sys.argv[2]}),
    ]:
        try:
            call(ctx, tool, args)
            out.append({"code": None})
        except ProctorError as exc:
            out.append(exc.to_dict())
    print(json.dumps(out))
    """
)


def test_a_write_the_file_system_refuses_is_a_clean_refusal(env: Env) -> None:
    env.write("a.txt", "small\n")
    before = snapshot(env.root)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(env.root), env.digest("a.txt")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    errors = json.loads(proc.stdout.splitlines()[-1])
    for error in errors:
        assert (error["code"], error["details"]["errno"]) == ("io_error", "EFBIG"), error
        assert str(env.root.parent) not in json.dumps(error)
    assert snapshot(env.root) == before  # no temp file left, a.txt as it was

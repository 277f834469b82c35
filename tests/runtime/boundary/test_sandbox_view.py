"""The sandbox's view is an allowlist: attacks on what it must never show (the real home when
``HOME`` points elsewhere, another account's home, ``/etc/ssl/private``, ``/etc/shadow``, the
host's ``/root``, ``/var/lib``, ``/srv``), what a workspace declares, and toolchains that work
from anywhere (a virtualenv under the home or ``/tmp``, a conda-like prefix).

Files planted outside the workspace for a test (in a home, in ``/etc/ssl/private``) get a random
name and are removed afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ConfigError
from proctor.runtime.boundary.sandbox_view import declared_reads
from proctor.runtime.engine.session import Session
from tests.runtime.boundary.sandbox_support import (
    call_receipts,
    call_records,
    needs_bwrap,
    result_json,
    write_probe,
)
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

pytestmark = needs_bwrap

PY = sys.executable
REAL_HOME = Path(pwd.getpwuid(os.getuid()).pw_dir)


def _command(root: Path, argv: list[str]) -> None:
    make_skill(
        root,
        "look",
        f"""minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: run
        tool: command.execute
        inputs: {json.dumps({"argv": argv})}
""",
    )


def _environ(root: Path, **extra: str) -> dict[str, str]:
    return {
        "PROCTOR_HOME": str(root / ".home"),
        "PROCTOR_SANDBOX": "required",
        "PATH": os.environ.get("PATH", os.defpath),
        **extra,
    }


def _probe(root: Path, *ops: str, **environ: str) -> tuple[Session, Any, dict[str, Any]]:
    write_probe(root)
    _command(root, [PY, "tools/attack.py", *ops])
    s = session(root, environ=_environ(root, **environ))
    env = s.run("look", cwd=root)
    assert env.outcome == "completed", env.refusal
    (call,) = call_records(s, env.run_id)
    assert call.result["sandbox"]["used"] == "bubblewrap"
    return s, env, result_json(env, list(ops))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


@pytest.fixture
def in_home() -> Iterator[Path]:
    """A folder of this test's own in the account's real home, removed afterwards."""
    folder = REAL_HOME / f"proctor-test-{secrets.token_hex(6)}"
    folder.mkdir(mode=0o700)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_real_home_is_unseen_when_home_points_elsewhere(ws: Path, in_home: Path) -> None:
    secret = in_home / "token.txt"
    secret.write_text(secrets.token_hex(16))
    elsewhere = ws / "fake-home"
    elsewhere.mkdir()
    _, _, got = _probe(
        ws, "read", str(secret), "write", str(in_home / "planted"), HOME=str(elsewhere)
    )
    assert _sha(secret)  # the host reads it
    assert got[str(secret)] == "denied"
    assert not (in_home / "planted").exists()  # at most it went to an empty scratch home


def _other_homes() -> list[Path]:
    """Existing homes of login accounts other than this one, in the password database."""
    out = []
    for entry in pwd.getpwall():
        home = Path(entry.pw_dir)
        if entry.pw_uid in (os.getuid(), 65534) or entry.pw_uid < 1000 or not home.is_dir():
            continue
        out.append(home)
    return out


def test_another_accounts_home_is_unseen(ws: Path) -> None:
    targets = []
    for home in _other_homes():
        targets += [p for p in sorted(home.iterdir()) if p.is_file() and os.access(p, os.R_OK)][:2]
    if not targets:
        pytest.skip("no other login account here has a home with a file this user can read")
    ops = [x for t in targets for x in ("read", str(t))]
    _, _, got = _probe(ws, *ops)
    for target in targets:
        assert _sha(target) and got[str(target)] == "denied", target


def test_system_secrets_and_other_host_folders_are_unseen(ws: Path) -> None:
    private = Path("/etc/ssl/private")
    planted = private / f"proctor-test-{secrets.token_hex(6)}.key"
    plantable = private.is_dir() and os.access(private, os.W_OK)
    if plantable:
        planted.write_text("-----BEGIN PRIVATE KEY-----\n")
        planted.chmod(0o600)
    targets = [planted] if plantable else []
    targets += [p for p in (Path("/etc/shadow"), Path("/etc/gshadow")) if os.access(p, os.R_OK)]
    for folder in ("/var/lib", "/srv", "/root", "/home", "/var/log", "/run"):
        with os.scandir(folder) if os.path.isdir(folder) else _empty() as entries:
            targets += [Path(e.path) for e in entries if e.is_file(follow_symlinks=False)][:2]
    try:
        assert targets, "nothing on this host to try"
        ops = [x for t in targets for x in ("read", str(t))]
        _, _, got = _probe(ws, *ops)
        for target in targets:
            assert got[str(target)] == "denied", target
    finally:
        if plantable:
            planted.unlink()


class _empty:
    def __enter__(self) -> list[os.DirEntry[str]]:
        return []

    def __exit__(self, *exc: object) -> None:
        return None


def test_a_declared_folder_is_shown_read_only_and_a_home_may_not_be_declared(
    ws: Path, tmp_path: Path
) -> None:
    outside = Path(os.environ.get("PROCTOR_TEST_VARTMP", "/var/tmp")) / f"pt-{secrets.token_hex(6)}"
    shown, unshown = outside / "shown", outside / "unshown"
    shown.mkdir(parents=True)
    unshown.mkdir()
    try:
        (shown / "data.txt").write_text("declared")
        (unshown / "data.txt").write_text("not declared")
        (ws / "proctor.toml").write_text(f"[sandbox]\nread = [{json.dumps(str(shown))}]\n")
        ops = ["read", str(shown / "data.txt"), "read", str(unshown / "data.txt")]
        ops += ["write", str(shown / "planted.txt")]
        _, _, got = _probe(ws, *ops)
        assert got[str(shown / "data.txt")] == _sha(shown / "data.txt")
        assert got[str(unshown / "data.txt")] == "denied"
        assert got[str(shown / "planted.txt")] == "denied"
        assert not (shown / "planted.txt").exists()
    finally:
        shutil.rmtree(outside, ignore_errors=True)
    for bad in (str(REAL_HOME), "/", "relative/path"):
        (tmp_path / "proctor.toml").write_text(f"[sandbox]\nread = [{json.dumps(bad)}]\n")
        with pytest.raises(ConfigError) as caught:
            declared_reads(tmp_path)
        assert caught.value.code == "sandbox_read_invalid"


def _venv(folder: Path) -> Path:
    """A virtualenv at ``folder`` (no pip) whose ``python`` runs this proctor: a ``.pth``
    names the folders this interpreter imports proctor and its dependencies from."""
    subprocess.run([PY, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # every folder this interpreter imports from, but its standard library: proctor's source
    # and its dependencies, wherever this test runs from
    base = (sys.base_prefix, sys.base_exec_prefix)
    found = [p for p in sys.path if os.path.isdir(p) and not p.startswith(base)]
    (Path(site) / "_proctor.pth").write_text("".join(f"{p}\n" for p in found))
    return python


_WORKER_RUN = """
import json, sys
from pathlib import Path
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
ws = Path(sys.argv[1])
s = Session(Workspace(ws), environ=json.loads(sys.argv[2]))
try:
    env = s.run("wk", cwd=ws)
    calls = list(s.store.calls(env.run_id or ""))
    print(json.dumps({"outcome": env.outcome, "result": env.result,
                      "refusal": None if env.refusal is None else env.refusal.code,
                      "sandbox": calls[0].result.get("sandbox") if calls else None}))
finally:
    s.close()
"""

_WORKER_MODULE = """
import sys
def main(inputs, ctx):
    return {"prefix": sys.prefix, "executable": sys.executable}
"""


def _worker_from(python: Path, ws: Path) -> dict[str, Any]:
    """Run a worker step with a proctor started by ``python``; its outcome and result."""
    make_skill(
        ws,
        "wk",
        """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: work
        worker: {module: scripts/work.py, function: main}
""",
    )
    (ws / "skills" / "wk" / "scripts").mkdir(exist_ok=True)
    (ws / "skills" / "wk" / "scripts" / "work.py").write_text(_WORKER_MODULE)
    environ = _environ(ws)
    done = subprocess.run(
        [str(python), "-c", _WORKER_RUN, str(ws), json.dumps(environ)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PROCTOR_SANDBOX": "required"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


@pytest.mark.parametrize("where", ["home", "tmp"])
def test_a_worker_and_a_command_run_from_a_virtualenv_anywhere(
    where: str, ws: Path, tmp_path: Path, in_home: Path
) -> None:
    base = in_home if where == "home" else tmp_path
    python = _venv(base / "venv")
    got = _worker_from(python, ws)
    assert got["outcome"] == "completed", got
    assert got["sandbox"]["used"] == "bubblewrap"
    # the worker runs on the virtualenv's python (with -S: its prefix is the base's)
    assert got["result"]["executable"] == str(python)
    # a command that runs the virtualenv's own python, by its path
    _command(ws, [str(python), "-c", "import sys; print(sys.prefix)"])
    s = session(ws, environ=_environ(ws))
    env = s.run("look", cwd=ws)
    assert env.outcome == "completed", env.refusal
    assert env.result["stdout"].strip() == str((base / "venv").resolve())
    (body,) = call_receipts(s, env.receipt_id)
    assert body["sandbox"]["used"] == "bubblewrap" and body["sandbox"]["verified"] is True
    assert str((base / "venv").resolve()) in body["sandbox"]["toolchains"]


def _conda_like(prefix: Path) -> Path:
    """A standalone Python installation at ``prefix`` laid out as conda lays one (``bin``,
    ``lib/pythonX.Y``, ``conda-meta``), not a virtualenv: the files are hard links (or copies)
    of this interpreter's base installation."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = Path(sys.base_prefix)
    (prefix / "bin").mkdir(parents=True)
    (prefix / "conda-meta").mkdir()
    (prefix / "conda-meta" / "history").write_text("")
    binary = Path(os.path.realpath(base / "bin" / version))
    shutil.copy2(binary, prefix / "bin" / version)
    (prefix / "bin" / "python").symlink_to(version)

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(
        base / "lib" / version,
        prefix / "lib" / version,
        copy_function=link,
        ignore=shutil.ignore_patterns("site-packages", "test", "__pycache__", "idlelib"),
    )
    for shared in base.glob("lib/libpython*"):
        link(str(shared), str(prefix / "lib" / shared.name))
    return prefix / "bin" / "python"


def test_a_command_runs_a_conda_like_prefix_in_the_home(ws: Path, in_home: Path) -> None:
    python = _conda_like(in_home / "miniconda3")
    probe = "import sys, os; print(sys.prefix); print(os.path.isdir(os.path.expanduser('~/..')))"
    _command(ws, [str(python), "-I", "-c", probe])
    s = session(ws, environ=_environ(ws))
    env = s.run("look", cwd=ws)
    assert env.outcome == "completed", env.refusal
    assert env.result["stdout"].splitlines()[0] == str((in_home / "miniconda3").resolve())
    # the rest of the home stays out of sight: this test's own folder holds only the prefix
    write_probe(ws)
    (in_home / "other.txt").write_text("not a toolchain")
    _command(ws, [str(python), "tools/attack.py", "read", str(in_home / "other.txt")])
    env = session(ws, environ=_environ(ws)).run("look", cwd=ws)
    assert env.outcome == "completed", env.refusal
    assert json.loads(env.result["stdout"]) == ["denied"]


def test_each_declared_folder_is_audited_and_a_bad_declaration_refuses_the_call(
    ws: Path, tmp_path: Path
) -> None:
    shown = tmp_path / "declared"
    shown.mkdir()
    (ws / "proctor.toml").write_text(f"[sandbox]\nread = [{json.dumps(str(shown))}]\n")
    _command(ws, [PY, "-c", "print('ran')"])
    env = session(ws, environ=_environ(ws)).run("look", cwd=ws)
    assert env.outcome == "completed", env.refusal
    events = [json.loads(x) for x in (ws / ".proctor" / "audit.jsonl").read_text().splitlines()]
    (declared,) = [e for e in events if e["event"] == "sandbox_read_declared"]
    assert declared["folders"] == [str(shown.resolve())] and declared["tool"] == "command.execute"
    (ws / "proctor.toml").write_text(f"[sandbox]\nread = [{json.dumps(str(REAL_HOME))}]\n")
    _command(ws, [PY, "-c", "open('ran.txt', 'w').write('x')"])
    env = session(ws, environ=_environ(ws)).run("look", cwd=ws)
    assert env.refusal is not None and env.refusal.code == "sandbox_read_invalid"
    assert not (ws / "ran.txt").exists()


def test_a_planted_virtualenv_config_or_a_program_path_shows_no_other_folder(
    ws: Path, in_home: Path
) -> None:
    # a run may write its workspace's .venv/pyvenv.cfg, and an agent chooses what a call
    # starts: neither may make a folder of the home visible that holds no installation
    secrets_dir = in_home / "notes"
    secrets_dir.mkdir()
    secret = secrets_dir / "token.txt"
    secret.write_text(secrets.token_hex(16))
    bare_bin = in_home / "bin"
    bare_bin.mkdir()
    (bare_bin / "kept.txt").write_text(secrets.token_hex(16))
    tool = bare_bin / "tool"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    (ws / ".venv").mkdir()
    (ws / ".venv" / "pyvenv.cfg").write_text(f"home = {secrets_dir}\n")
    ops = ["read", str(secret), "read", str(bare_bin / "kept.txt")]
    _, _, got = _probe(ws, *ops)
    assert got[str(secret)] == "denied" and got[str(bare_bin / "kept.txt")] == "denied"
    _command(ws, [str(tool)])
    env = session(ws, environ=_environ(ws)).run("look", cwd=ws)
    # its folder is not shown, so it cannot start
    assert env.refusal is not None and env.refusal.code == "command_not_started"

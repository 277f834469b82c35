"""The README's install without extras (``pip install -e .`` in a fresh venv): every command of
``proctor --help``, and every subcommand of its groups, answers ``--help`` without a
traceback, and the commands that need an extra (``serve``, ``registry serve``, ``mcp``) refuse
to start naming it, exit 3. Also: ``proctor registry serve --port 0`` prints the address it
bound, and that address serves.

The venv is made once per test session (a real ``python -m venv`` and pip install, from pip's
cache when it has the packages), or taken from ``$PROCTOR_BASE_VENV``; its tests are marked
``network_fetch`` (pip reaches the package registry).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]

# Walks the click group in the base venv, in one process: each command's and subcommand's help.
WALK = r"""
import json, sys, traceback
import click
from click.testing import CliRunner
from proctor.cli.group import cli

runner = CliRunner()
ctx = click.Context(cli)
out = {}

def walk(path, command):
    done = runner.invoke(cli, [*path, "--help"])
    failed = None
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        failed = "".join(traceback.format_exception(done.exception))
    out[" ".join(path)] = {"code": done.exit_code, "failed": failed, "text": done.output[:200]}
    if isinstance(command, click.Group):
        sub = click.Context(command, info_name=path[-1], parent=ctx)
        for name in command.list_commands(sub):
            walk([*path, name], command.get_command(sub, name))

for name in cli.list_commands(ctx):
    try:
        command = cli.get_command(ctx, name)
    except Exception:
        out[name] = {"code": None, "failed": traceback.format_exc(), "text": ""}
        continue
    walk([name], command)
print(json.dumps(out))
"""


@pytest.fixture(scope="session")
def base_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding proctor with its base dependencies only (no extra), made once per test
    session: xdist's workers share it through a lock in the session's shared temporary folder.
    Without the package registry the tests skip, unless ``PROCTOR_REQUIRE_NETWORK_FETCH=1``."""
    import fcntl

    named = os.environ.get("PROCTOR_BASE_VENV")
    if named:
        return Path(named)
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    venv = shared / "base-venv"
    with (shared / "base-venv.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / "ready").exists():
            _make_venv(venv)
            (venv / "ready").touch()
    return venv


def _make_venv(venv: Path) -> None:
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
         "-e", str(REPO)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    if done.returncode != 0:
        message = f"pip could not install proctor's base dependencies (exit {done.returncode})"
        if os.environ.get("PROCTOR_REQUIRE_NETWORK_FETCH") == "1":
            pytest.fail(message + ": " + done.stderr[-2000:])
        pytest.skip(message + "; set PROCTOR_REQUIRE_NETWORK_FETCH=1 to make this a failure")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROCTOR_", "PYTHON"))}
    env["PROCTOR_HOME"] = str(tmp_path / "home")
    return env


@pytest.mark.network_fetch
def test_the_base_install_lacks_every_extra(base_venv: Path) -> None:
    probe = "import importlib.util as u; print([m for m in ('starlette', 'uvicorn', 'jinja2'," \
        " 'mcp', 'psycopg', 'redis', 'keyring', 'openai') if u.find_spec(m)])"  # fmt: skip
    done = subprocess.run(
        [str(base_venv / "bin" / "python"), "-c", probe], capture_output=True, text=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


@pytest.mark.network_fetch
def test_every_command_answers_help_without_a_traceback(base_venv: Path, tmp_path: Path) -> None:
    proctor = str(base_venv / "bin" / "proctor")
    top = subprocess.run(
        [proctor, "--help"], cwd=tmp_path, env=_env(tmp_path),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert top.returncode == 0 and "Traceback" not in top.stderr, top.stderr
    listed = re.findall(r"^  ([a-z][a-z-]*)  ", top.stdout.split("Commands:")[1], re.MULTILINE)
    assert {"run", "serve", "registry", "mcp", "approve"} <= set(listed)
    done = subprocess.run(
        [str(base_venv / "bin" / "python"), "-c", WALK], cwd=tmp_path, env=_env(tmp_path),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    helped = json.loads(done.stdout)
    assert set(listed) <= {path.split()[0] for path in helped}
    assert "registry serve" in helped and "console user add" in helped
    broken = {path: r["failed"] for path, r in helped.items() if r["failed"] or r["code"] != 0}
    assert broken == {}, json.dumps(broken, indent=1)[:4000]


@pytest.mark.network_fetch
@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["serve", "--port", "0"], "console"),
        (["registry", "serve", "--dir", "registry-data", "--port", "0"], "registry"),
        (["mcp"], "mcp"),
    ],
)
def test_a_command_whose_extra_is_missing_names_it(
    base_venv: Path, tmp_path: Path, argv: list[str], extra: str
) -> None:
    done = subprocess.run(
        [str(base_venv / "bin" / "proctor"), *argv], cwd=tmp_path, env=_env(tmp_path),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "ModuleNotFoundError" not in done.stderr
    assert f"pip install 'proctor[{extra}]'" in done.stderr, done.stderr
    assert not (tmp_path / "registry-data").exists()  # refused before anything was made


def test_registry_serve_on_port_0_prints_the_address_it_serves(tmp_path: Path) -> None:
    env = {**_env(tmp_path), "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctor", "registry", "serve", "--dir", "data", "--port", "0"],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        url = None
        while url is None:
            assert time.monotonic() < deadline, "no address printed"
            line = proc.stderr.readline()
            assert line, f"ended without an address ({proc.poll()})"
            found = re.match(r"registry: (http://127\.0\.0\.1:(\d+))\s", line)
            if found:
                url = found.group(1)
                assert int(found.group(2)) != 0
        served = httpx.get(url + "/v1/openapi.json", timeout=30)
        assert served.status_code == 200 and served.json()["info"]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if proc.stderr is not None:
            proc.stderr.close()

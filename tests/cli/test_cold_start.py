"""Cold start: what ``import proctor`` and ``proctor --help`` load.

Each heavy dependency costs milliseconds at every start (httpx ~100 ms, pydantic ~80 ms,
rich ~25 ms, importlib.metadata ~15 ms); these must load only in the commands that use
them. The checks run in a fresh interpreter, since this test process has imported everything
already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    "httpx",
    "pydantic",
    "pydantic_core",
    "rich",
    "sqlite3",
    "cryptography",
    "yaml",
    "importlib.metadata",  # ~15 ms: click's version option must resolve it only for --version
)

_PROBE = """
import contextlib, io, json, sys
{body}
print(json.dumps(sorted(name for name in {heavy!r} if name in sys.modules)))
"""

_HELP = """
from proctor.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main(["--help"])
    except SystemExit:
        pass
assert "Commands" in out.getvalue(), out.getvalue()
"""


def _loaded(
    body: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    names: tuple[str, ...] = HEAVY,
) -> list[str]:
    probe = _PROBE.format(body=body, heavy=names)
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("import proctor", id="import proctor"),
        pytest.param(_HELP, id="proctor --help"),
    ],
)
def test_start_up_loads_no_heavy_dependency(body: str) -> None:
    assert _loaded(body) == []


def test_the_probe_sees_a_heavy_import() -> None:
    # The probe must be able to fail: the egress transport subclasses httpx's (and httpx itself
    # loads rich, for its own command line).
    assert "httpx" in _loaded("import proctor.runtime.boundary.transport")


def test_http_tool_and_egress_policy_load_without_httpx() -> None:
    body = "import proctor.runtime.tools.http, proctor.runtime.boundary.egress"
    assert "httpx" not in _loaded(body)


def _hello_world_body() -> str:
    skill = Path(__file__).resolve().parents[2] / "examples" / "hello-world"
    return f"""
from proctor.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main(["run", {str(skill)!r}, "-i", "message=hi", "--json"])
    except SystemExit as exc:
        assert not exc.code, (exc.code, out.getvalue())
assert json.loads(out.getvalue())["outcome"] == "completed", out.getvalue()
"""


def test_a_run_that_sends_nothing_imports_neither_httpx_nor_pydantic(tmp_path: Path) -> None:
    (tmp_path / ".proctor").mkdir()
    env = {**os.environ, "PROCTOR_HOME": str(tmp_path / "home")}
    connectors = "proctor.runtime.connectors.operations"  # a run that has none: not imported
    loaded = _loaded(_hello_world_body(), cwd=tmp_path, env=env, names=(*HEAVY, connectors))
    # The run's documents are strict records (proctor.contracts.strict), not pydantic models.
    assert "httpx" not in loaded and connectors not in loaded
    assert "pydantic" not in loaded and "pydantic_core" not in loaded
    assert "yaml" in loaded and "sqlite3" in loaded  # the probe saw the run's own imports


def test_a_run_defines_its_value_classes_without_dataclasses_or_inspect(tmp_path: Path) -> None:
    # The standard decorator imports inspect (with ast, dis and tokenize) and compiles five
    # methods per class at import; proctor's value classes (proctor.contracts.values) do not.
    # The home's first run makes its signing key with cryptography's serialization (which may
    # import dataclasses itself): the second run is the one judged.
    (tmp_path / ".proctor").mkdir()
    env = {**os.environ, "PROCTOR_HOME": str(tmp_path / "home")}
    names = ("dataclasses", "inspect", "ast", "sqlite3")
    assert "inspect" in _loaded("import dataclasses", names=names)  # the probe can fail
    _loaded(_hello_world_body(), cwd=tmp_path, env=env, names=names)
    loaded = _loaded(_hello_world_body(), cwd=tmp_path, env=env, names=names)
    assert loaded == ["sqlite3"]  # and it saw the run's own imports

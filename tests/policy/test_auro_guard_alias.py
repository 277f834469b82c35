"""A guard module written for the reference kernel loads unchanged and blocks what it blocks
there.

``tests/assets/auro_guards/team_guards.py`` imports ``auro_runtime.guards``. It is run under the
reference kernel itself (its wheel, downloaded at test time into a temporary folder, in a child
Python) and under proctor, on the same calls; the verdicts agree call for call. Then a run under
proctor reading ``private/`` is refused and the file's content is in no output.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from proctor.policy import GuardContext, GuardRegistry, user_guards
from proctor.runtime.agents.views import REFERENCE_VIEW
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "auro_guards"
GUARDS = {"read_file": "check_private_reads", "list_dir": "check_private_reads",
          "write_file": "check_private_reads", "http_request": "check_alias_allowlist"}  # fmt: skip
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "private/keys.txt"}),
    ("read_file", {"path": "./private/plans.md"}),
    ("read_file", {"path": "notes.txt"}),
    ("list_dir", {"path": "private"}),
    ("list_dir", {"path": "public"}),
    ("write_file", {"path": "private/x.md", "content": "x"}),
    ("http_request", {"url": "https://api.example.com/", "auth_alias": "stolen_token"}),
    ("http_request", {"url": "https://api.example.com/", "auth_alias": "github_token"}),
    ("http_request", {"url": "https://api.example.com/"}),
]

UNDER_AURO = """
import json, sys
from auro_runtime.guards import GuardContext, get_guard_registry
module = sys.argv[1]
exec(compile(open(module, encoding="utf-8").read(), module, "exec"), {"__name__": "team"})
registry = get_guard_registry()
out = []
for tool, guard, args in json.loads(sys.stdin.read()):
    ctx = GuardContext(tool_name=tool, raw_args=args, args=args, reason="r",
                       directive_id=None, run_history=[])
    verdict = registry[guard](ctx)
    out.append(None if verdict is None else [verdict.allowed, verdict.code])
print(json.dumps(out))
"""


def load_user_guards(workspace: Path, registry: GuardRegistry) -> tuple[str, ...]:
    """The workspace's guard modules loaded into ``registry``, trusted as a person would trust
    them where guard modules need a person's trust (``proctor trust``) first."""
    load: Any = user_guards.load_user_guards
    read = getattr(user_guards, "read_guard_files", None)
    if read is None:  # no trust step in this build
        return tuple(load(workspace, registry))
    files = read(workspace)
    trusting: Any = getattr(user_guards, "trusting")  # noqa: B009 - absent where no trust step
    return tuple(load(files, registry, trust=trusting(files.digest)))


def _under_auro(tmp_path: Path) -> list[Any]:
    from tests.reference_wheel import reference_wheel

    wheel = reference_wheel(tmp_path / "wheel")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site, [n for n in archive.namelist() if n.startswith("auro_runtime/")])
    proc = subprocess.run(
        [sys.executable, "-c", UNDER_AURO, str(ASSETS / "team_guards.py")],
        input=json.dumps([[tool, GUARDS[tool], args] for tool, args in CALLS]),
        env={"PYTHONPATH": str(site), "PATH": ""},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    verdicts: list[Any] = json.loads(proc.stdout)
    return verdicts


def _under_proctor(tmp_path: Path) -> list[Any]:
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(ASSETS / "team_guards.py", ws / "team_guards.py")
    (ws / "proctor.toml").write_text('[policy]\nguards = "team_guards.py"\n', encoding="utf-8")
    registry = GuardRegistry()
    assert load_user_guards(ws, registry) == ("check_alias_allowlist", "check_private_reads")
    out = []
    for name, args in CALLS:
        tool, _description, _schema, translate = REFERENCE_VIEW[name]
        mapped = translate(dict(args))  # the call as proctor's tool receives it
        guard: Any = registry.get(GUARDS[name])
        ctx = GuardContext(tool, mapped, mapped, "r", None, ())
        verdict = guard(ctx)
        out.append(None if verdict is None else [verdict.allowed, verdict.code])
    return out


@pytest.mark.network_fetch
def test_the_module_gives_the_same_verdicts_under_both(tmp_path: Path) -> None:
    auro = _under_auro(tmp_path)
    assert auro[0] == [False, "private_path"] and auro[6] == [False, "alias_not_approved"]
    assert _under_proctor(tmp_path) == auro


def test_no_real_auro_runtime_is_needed_or_touched(tmp_path: Path) -> None:
    """The alias is for the guard module alone: the process gains no ``auro_runtime``."""
    _under_proctor(tmp_path)
    assert "auro_runtime" not in sys.modules and "auro_runtime.guards" not in sys.modules


READER = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {path: {type: string}}
      required: [path]
    steps:
      - id: read
        tool: fs.read
        inputs: {path: $input.path}
"""


def test_a_run_is_refused_where_the_guard_refuses(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "reader", READER)
    shutil.copy(ASSETS / "team_guards.py", root / "team_guards.py")
    (root / "policies").mkdir()
    shutil.copy(ASSETS / "team.yaml", root / "policies" / "team.yaml")
    (root / "proctor.toml").write_text('[policy]\nguards = "team_guards.py"\n', encoding="utf-8")
    (root / "private").mkdir()
    (root / "private" / "keys.txt").write_text("launch-code-73519\n", encoding="utf-8")
    (root / "notes.txt").write_text("hello\n", encoding="utf-8")
    # trusted as CI trusts a workspace's guard modules where they need a person's trust first
    s = session(root, environ={"PROCTOR_HOME": str(root / ".home"), "PROCTOR_TRUST_WORKSPACE": "1"})
    grant = authority(effects="allow")
    refused = s.run("reader", inputs={"path": "private/keys.txt"}, authority=grant).to_json()
    assert refused["outcome"] != "completed"
    assert refused["refusal"]["code"] == "private_path", refused
    allowed = s.run("reader", inputs={"path": "notes.txt"}, authority=grant).to_json()
    assert allowed["outcome"] == "completed", allowed
    written = "\n".join(
        p.read_bytes().decode("utf-8", "replace")
        for p in (root / ".proctor").rglob("*")
        if p.is_file()
    )
    assert "launch-code-73519" not in written + json.dumps(refused)


VARIANTS = """
import auro_runtime.guards as g
from auro_runtime import guards


@g.register_guard("check_variant_one")
def one(ctx):
    return None if ctx.tool_name != "echo" else g.GuardVerdict(False, ctx.args["message"], "one")


@guards.register_guard("check_variant_two")
def two(ctx):
    import auro_runtime.guards as late

    return late.GuardVerdict(allowed=True, message="fine")
"""


def test_every_import_form_of_the_guard_module_resolves(tmp_path: Path) -> None:
    (tmp_path / "variants.py").write_text(VARIANTS, encoding="utf-8")
    (tmp_path / "proctor.toml").write_text('[policy]\nguards = "variants.py"\n', encoding="utf-8")
    registry = GuardRegistry.with_shipped()
    assert load_user_guards(tmp_path, registry) == ("check_variant_one", "check_variant_two")
    one: Any = registry.get("check_variant_one")
    verdict = one(GuardContext("echo", {"text": "hi"}, {"text": "hi"}, "", None, ()))
    assert (verdict.allowed, verdict.message, verdict.code) == (False, "hi", "one")
    two: Any = registry.get("check_variant_two")
    assert two(GuardContext("fs.read", {}, {}, "", None, ())).allowed is True


def test_other_reference_modules_are_not_provided(tmp_path: Path) -> None:
    from proctor.errors import ConfigError

    (tmp_path / "bad.py").write_text("from auro_runtime.executor import execute\n")
    (tmp_path / "proctor.toml").write_text('[policy]\nguards = "bad.py"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_user_guards(tmp_path, GuardRegistry.with_shipped())
    assert refused.value.code == "guard_module_failed"

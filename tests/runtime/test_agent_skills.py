"""Agent Skills packages: SKILL.md alone is a skill with one agent method.

Three published packages are fetched from the npm registry at test time (``npm pack``, never
vendored): they load, list their mapped tools, and each runs one turn against a stub model on
loopback. Without the registry the fetch test skips, unless ``PROCTOR_REQUIRE_NETWORK_FETCH=1``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.errors import ParseError
from proctor.parser.agent_skills import map_allowed_tools
from proctor.runtime.agents import ManagedAgent
from proctor.runtime.skills import load_skill
from tests.runtime.agent_stub import StubModel, answer, config, offered_tools, tool_results
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_workspace,
    session,
)

PUBLISHED = [
    # (npm package@version, the SKILL.md folder inside it)
    ("agent-reviews@0.7.0", "package/skills/agent-reviews"),
    ("@ckelsoe/claude-skill-prompt-architect@2.1.4", "package/prompt-architect"),
    ("@wednesday-solutions-eng/ai-agent-skills@1.1.0", "package/skills/wednesday-dev"),
]

SCRIPTED = """---
name: scripted
description: Runs its helper script and reads its reference.
allowed-tools: Read Bash(python3 scripts/hello.py:*) WebSearch Task
---
Run `python3 scripts/hello.py` and read references/notes.md.
"""


def test_allowed_tools_map_by_the_table() -> None:
    mapping = map_allowed_tools(
        "Bash(node scripts/agent-reviews.js *) Bash(gh auth status) Read Grep Glob WebFetch"
        " Edit Write TodoWrite mcp__github__x"
    )
    assert mapping.tools == (
        "command.execute",
        "fs.edit",
        "fs.list",
        "fs.read",
        "fs.search",
        "fs.write",
        "http.request",
    )
    assert mapping.unknown == ("TodoWrite", "mcp__github__x")
    assert mapping.allows_argv(["node", "scripts/agent-reviews.js", "--list"])
    assert mapping.allows_argv(["gh", "auth", "status"])
    assert not mapping.allows_argv(["gh", "auth", "status", "--show-token"])  # exact
    assert not mapping.allows_argv(["rm", "-rf", "."])
    assert map_allowed_tools(None).tools == ("fs.read",)  # its own files stay readable
    assert map_allowed_tools(["Bash"]).commands is None


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=40), st.lists(st.text(max_size=10), max_size=4), st.integers()))
def test_fuzz_allowed_tools_map_or_refuse_clearly(value: Any) -> None:
    try:
        mapping = map_allowed_tools(value)
    except ParseError as exc:
        assert exc.code == "skill_md_field"
    else:
        assert "fs.read" in mapping.tools


def _ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    folder = root / "skills" / "scripted"
    (folder / "scripts").mkdir(parents=True)
    (folder / "references").mkdir()
    (folder / "SKILL.md").write_text(SCRIPTED)
    (folder / "scripts" / "hello.py").write_text("print('hello from the script')\n")
    (folder / "references" / "notes.md").write_text("reference notes\n")
    return root


def test_a_skill_md_package_runs_one_turn_with_its_mapped_tools(tmp_path: Path) -> None:
    root = _ws(tmp_path)
    dialect = "chat_completions"
    script = [
        answer(
            dialect,
            calls=[
                ("fs_read", {"path": "skills/scripted/references/notes.md"}),
                (
                    "command_execute",
                    {"argv": ["python3", "scripts/hello.py"], "cwd": "skills/scripted"},
                ),
                ("command_execute", {"argv": ["touch", "pwned.txt"]}),
            ],
        ),
        answer(dialect, text='{"done": true}'),
    ]
    with StubModel(script) as stub:
        agent = ManagedAgent(config(stub, dialect), key="stub-key-0123456789abcdef")
        s = session(root, agent_driver=agent)
        env = s.run(
            "scripted",
            inputs={"task": "say hello"},
            cwd=root,
            authority=authority(effects="allow", reach="workspace"),
        )
    assert env.status == "sealed" and env.outcome == "completed", env.refusal
    assert env.result == {"done": True}
    assert sorted(offered_tools(dialect, stub.seen[0])) == ["command_execute", "fs_read"]
    read, ran, refused = tool_results(dialect, stub.seen[1])
    assert read["result"]["content"] == "reference notes\n"
    assert ran["status"] == "completed", ran
    assert refused["error"]["code"] == "command_not_allowed"
    assert not (root / "pwned.txt").exists()


def _npm_pack(spec: str, folder: Path) -> Path:
    npm = shutil.which("npm")
    message = f"npm could not fetch {spec}"
    if npm is not None:
        proc = subprocess.run(
            [npm, "pack", "--silent", spec, "--pack-destination", str(folder)],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        packed = [folder / line.strip() for line in proc.stdout.splitlines() if line.strip()]
        if proc.returncode == 0 and packed and packed[-1].exists():
            return packed[-1]
        message += f" (exit {proc.returncode})"
    if os.environ.get("PROCTOR_REQUIRE_NETWORK_FETCH") == "1":
        pytest.fail(message)
    pytest.skip(message + "; set PROCTOR_REQUIRE_NETWORK_FETCH=1 to make this a failure")


def _unpack(tarball: Path, inside: str, into: Path) -> Path:
    with tarfile.open(tarball) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(inside + "/")]
        archive.extractall(into / "x", members=members, filter="data")
    return into / "x" / inside


@pytest.mark.network_fetch
def test_three_published_packages_load_list_their_tools_and_run_a_turn(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    fetched = tmp_path / "fetched"
    fetched.mkdir()
    dialect = "chat_completions"
    for n, (spec, inside) in enumerate(PUBLISHED):
        source = _unpack(_npm_pack(spec, fetched), inside, tmp_path / f"u{n}")
        target = root / "skills" / source.name
        shutil.copytree(source, target)
        if (target / "run.yaml").exists():
            pytest.fail(f"{spec} is not a SKILL.md-only package")
        skill = load_skill(source.name, cwd=root, workspace_root=root)
        mapping = skill.tool_mapping
        assert mapping is not None and "fs.read" in mapping.tools
        assert skill.package.profile is not None and list(skill.package.profile.methods) == ["main"]
        if source.name == "agent-reviews":
            assert "command.execute" in mapping.tools
            assert mapping.allows_argv(["gh", "pr", "view", "12"])
            assert not mapping.allows_argv(["gh", "pr", "merge", "12"])
        script = [answer(dialect, text='{"ok": true}')]
        with StubModel(script) as stub:
            agent = ManagedAgent(config(stub, dialect), key="stub-key-0123456789abcdef")
            env = session(root, agent_driver=agent).run(
                source.name, inputs={"task": "one turn"}, cwd=root,
                authority=authority(effects="allow", reach="workspace"),
            )  # fmt: skip
        assert env.outcome == "completed" and env.result == {"ok": True}, env.refusal
        sent = json.dumps(stub.seen[0].body)
        first = json.dumps(skill.package.body.strip().splitlines()[0])[1:-1]
        assert first in sent  # the body reached the model
        shown = sorted(offered_tools(dialect, stub.seen[0]))
        assert shown == sorted(t.replace(".", "_") for t in mapping.tools)

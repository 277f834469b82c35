"""What a process keeps between runs (parsed packages, compiled schemas, the policy state) and
that every file edit is seen by the next run: nothing stale is ever enforced or executed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proctor.errors import ParseError
from proctor.parser.schemas import compile_schema
from proctor.runtime.skills import load_skill, locate, read_package
from tests.runtime.driver_support import (
    BLOCK_ECHO,
    approve,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

SAY = """minimum_proctor: 0.1.0
methods:
  main:
    description: Say {word}.
    inputs: {{type: object, properties: {{}}}}
    steps:
      - id: say
        tool: echo
        inputs: {{text: {word}}}
"""

GATED = """minimum_proctor: 0.1.0
methods:
  main:
    inputs: {type: object, properties: {}, required: name}
    steps:
      - id: confirm
        ask: {reason: Continue?}
      - id: say
        tool: echo
        inputs: {text: done}
"""


def _keep_stat(path: Path, text: str) -> None:
    """Rewrite ``path`` with ``text`` of the same size and put its old mtime back (an edit
    that a cache keyed on size and mtime alone would miss)."""
    before = path.stat()
    assert len(text.encode()) == before.st_size
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_mtime_ns == before.st_mtime_ns


def test_a_package_is_parsed_once_per_content_and_again_after_any_edit(tmp_path: Path) -> None:
    root = make_workspace(tmp_path)
    folder = make_skill(root, "say", SAY.format(word="hello"))
    first = load_skill("say", cwd=root, workspace_root=root)
    again = load_skill("say#main", cwd=root, workspace_root=root)
    assert again.package is first.package  # parsed once
    assert again.method == "main" and first.method is None
    _keep_stat(folder / "run.yaml", SAY.format(word="howdy"))
    edited = load_skill("say", cwd=root, workspace_root=root)
    assert edited.package is not first.package
    assert edited.package_digest != first.package_digest
    assert edited.package.profile is not None
    assert edited.package.profile.methods["main"].description == "Say howdy."


def test_a_package_taken_on_its_record_digest_never_serves_a_new_run(tmp_path: Path) -> None:
    root = make_workspace(tmp_path)
    make_skill(root, "gated", GATED)  # `required: name` breaks the draft-07 meta-schema
    folder, label, _ = locate("gated", cwd=root, workspace_root=root)
    digest = read_package(folder, label)[1]
    # a resume whose record holds exactly these bytes' digest skips the schema check ...
    trusted = load_skill("gated", cwd=root, workspace_root=root, recorded_digest=digest)
    assert trusted.package_digest == digest
    # ... but a load for a new run (or a record naming other bytes) checks, every time
    for recorded in (None, "sha256:" + "0" * 64, None):
        with pytest.raises(ParseError) as refused:
            load_skill("gated", cwd=root, workspace_root=root, recorded_digest=recorded)
        assert refused.value.code == "schema_invalid"
    with pytest.raises(ParseError):
        session(root).run("gated", cwd=root)


def test_a_compiled_schema_is_kept_by_content_and_a_refused_one_never(tmp_path: Path) -> None:
    one = compile_schema({"type": "object", "properties": {"a": {"type": "string"}}})
    same = compile_schema({"properties": {"a": {"type": "string"}}, "type": "object"})
    assert same is one
    for _ in range(2):
        with pytest.raises(ParseError) as refused:
            compile_schema({"type": "object", "required": "a"})
        assert refused.value.code == "schema_invalid"


def test_one_session_enforces_policy_files_as_they_are_at_each_run(tmp_path: Path) -> None:
    root = make_workspace(tmp_path)
    make_skill(root, "say", SAY.format(word="hello"))
    s = session(root)
    assert s.run("say", cwd=root).outcome == "completed"
    state = s.policy()
    assert s.policy()[0] is state[0]  # unchanged files: the loaded state is kept
    (root / "policies").mkdir()
    (root / "policies" / "team.yaml").write_text(BLOCK_ECHO)
    blocked = s.run("say", cwd=root)
    assert blocked.outcome == "blocked"
    assert blocked.trace[0].code == "empty_reason"
    # an edit that keeps the file's size and mtime is seen too (the key is its content)
    _keep_stat(root / "policies" / "team.yaml", BLOCK_ECHO.replace("block", "warn "))
    assert s.run("say", cwd=root).outcome == "completed"
    (root / "policies" / "team.yaml").unlink()
    assert s.run("say", cwd=root).outcome == "completed"


GUARD = """from proctor.policy import GuardVerdict, register_guard


@register_guard("no_word")
def no_word(ctx):
    if ctx.args.get("text") == "{word}":
        return GuardVerdict(False, "not that word", code="word_refused")
    return None
"""

GUARD_RULE = """id: team
rules:
  - id: team.no_word
    guard: no_word
    enforcement: block
    on_error: fail_closed
    tools: [echo]
"""


def test_an_edited_guard_module_is_run_again(tmp_path: Path) -> None:
    root = make_workspace(tmp_path)
    make_skill(root, "say", SAY.format(word="hello"))
    (root / "proctor.toml").write_text('[policy]\nguards = "guards.py"\n')
    (root / "guards.py").write_text(GUARD.format(word="hello"))
    (root / "policies").mkdir()
    (root / "policies" / "team.yaml").write_text(GUARD_RULE)
    s = session(root, trust_guards=True)
    assert s.run("say", cwd=root).trace[0].code == "word_refused"
    (root / "guards.py").write_text(GUARD.format(word="other"))
    assert s.run("say", cwd=root).outcome == "completed"


def test_a_resume_reuses_nothing_but_bytes_it_recorded(tmp_path: Path) -> None:
    root = make_workspace(tmp_path)
    folder = make_skill(root, "gate", GATED.replace(", required: name", ""))
    s = session(root)
    paused = s.run("gate", cwd=root)
    other = s.run("gate", cwd=root)
    assert paused.status == other.status == "needs_approval"
    done = s.resume(paused.run_id or "", approve(paused))
    assert done.status == "sealed" and done.outcome == "completed"
    _keep_stat(folder / "run.yaml", (folder / "run.yaml").read_text().replace("done", "dune"))
    from proctor.errors import ResumeRefused

    with pytest.raises(ResumeRefused) as refused:
        s.resume(other.run_id or "", approve(other))
    assert refused.value.code == "package_changed"

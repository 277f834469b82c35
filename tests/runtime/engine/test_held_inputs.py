"""What a session keeps between the runs it starts, and what each run sees afresh.

A session keeps the package a reference resolved to (:meth:`HeldSkills.resolve`), the policy
state (:mod:`proctor.runtime.engine.held_policy`) and the workspace its runs' governors see
(:meth:`Workspace.governing`, with the real paths of proctor's state); each is taken again
only while what it came from is as it was. Every test changes one of them between two runs of
one session, in a way a check of names, sizes or modification times alone would miss, and
shows that the second run is governed by the new one: a package edited in place runs as
edited and its new digest is the one recorded (and bound by the receipt); a folder that now
answers the reference first is the one that runs; a policy that newly blocks refuses; a link
to proctor's state swapped to another folder makes that folder the one a run never reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.runtime.skills import read_package
from tests.runtime.driver_support import (
    BLOCK_ECHO,
    age_past_racy_window,
    close_sessions,  # noqa: F401 - the autouse fixture
    edit_keeping_size_and_mtime,
    make_skill,
    make_workspace,
    session,
)

ECHO = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: say
        tool: echo
        inputs: {text: hello}
    result_from: [say]
"""

READ = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {path: {type: string}}
      required: [path]
      additionalProperties: false
    steps:
      - id: read
        tool: fs.read
        inputs: {path: $input.path}
    result_from: [read]
"""


def _said(envelope: object) -> object:
    assert envelope.outcome == "completed", envelope  # type: ignore[attr-defined]
    return envelope.result  # type: ignore[attr-defined]


def _recorded_digest(s: object, run_id: str) -> str:
    record = s.store.get_run(run_id)  # type: ignore[attr-defined]
    return str(record.data["package_digest"])


@pytest.mark.parametrize("settled", [True, False], ids=["on_stamps", "racy"])
def test_a_package_edited_in_place_between_two_runs_runs_as_edited(
    tmp_path: Path, settled: bool
) -> None:
    ws = make_workspace(tmp_path / "ws")
    folder = make_skill(ws, "one", ECHO)
    if settled:
        age_past_racy_window()
    s = session(ws)
    first = s.run("one", cwd=ws)
    assert "hello" in str(_said(first))
    assert "hello" in str(_said(s.run("one", cwd=ws)))  # the kept package
    assert any(k[0] == "ref" for k in s._held_skills._entries), "the session kept it"
    before = _recorded_digest(s, first.run_id or "")
    edit_keeping_size_and_mtime(folder / "run.yaml", ECHO.replace("hello", "howdy"))
    edited = s.run("one", cwd=ws)
    assert "howdy" in str(_said(edited))
    now = read_package(folder, "one")[1]
    assert now != before
    assert _recorded_digest(s, edited.run_id or "") == now  # what ran is what the run binds
    receipt = s.receipts.get(edited.receipt_id or "")
    assert now in str(receipt)


def test_a_folder_that_now_answers_the_reference_first_is_the_one_that_runs(
    tmp_path: Path,
) -> None:
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "one", ECHO)
    here = tmp_path / "here"
    here.mkdir()
    s = session(ws)
    assert "hello" in str(_said(s.run("one", cwd=here)))  # skills/one
    assert "hello" in str(_said(s.run("one", cwd=here)))
    local = here / "one"
    local.mkdir()
    (local / "SKILL.md").write_text("---\nname: one\ndescription: The local one.\n---\n")
    (local / "run.yaml").write_text(ECHO.replace("hello", "local"))
    ran = s.run("one", cwd=here)  # the current folder's package answers first
    assert "local" in str(_said(ran))
    assert _recorded_digest(s, ran.run_id or "") == read_package(local, "one")[1]


def test_a_policy_that_newly_blocks_refuses_the_next_run_of_one_session(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "one", ECHO)
    team = ws / "policies" / "team.yaml"
    team.parent.mkdir()
    team.write_text(BLOCK_ECHO.replace("enforcement: block", "enforcement: warn "))
    s = session(ws)
    s.run("one", cwd=ws)  # opens the run store in .proctor/
    age_past_racy_window()
    _said(s.run("one", cwd=ws))
    assert s._held_policy._entry is not None, "the session kept the policy state"
    _said(s.run("one", cwd=ws))
    edit_keeping_size_and_mtime(team, BLOCK_ECHO)  # only its change time tells
    refused = s.run("one", cwd=ws)
    assert refused.outcome == "blocked", refused
    assert refused.refusal is not None


def test_a_link_to_the_home_swapped_between_runs_moves_what_a_run_never_reads(
    tmp_path: Path,
) -> None:
    ws = make_workspace(tmp_path / "ws")
    make_skill(ws, "read", READ)
    for name in ("h1", "h2"):
        (ws / name).mkdir()
        (ws / name / "note.txt").write_text(f"{name}\n")
    link = ws / "homelink"
    link.symlink_to(ws / "h1")
    s = session(ws, environ={"PROCTOR_HOME": str(link)})

    def outcome(path: str) -> str:
        return s.run("read", inputs={"path": path}, cwd=ws).outcome or ""

    assert outcome("h1/note.txt") == "blocked"  # the home: proctor's state
    assert outcome("h2/note.txt") == "completed"
    assert outcome("h2/note.txt") == "completed"  # the governing workspace kept
    link.unlink()
    link.symlink_to(ws / "h2")
    assert outcome("h2/note.txt") == "blocked"  # the home now
    assert outcome("h1/note.txt") == "completed"


def test_a_config_made_where_none_was_even_a_dangling_link_is_seen_by_the_held_policy(
    tmp_path: Path,
) -> None:
    """The held policy state looks at each absent config name without raising (``access``,
    not following a link): a file, a folder or a link to nothing made at any of them drops
    the kept state."""
    import os

    from proctor.runtime.engine.held_policy import HeldPolicy

    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    held, text = HeldPolicy(), str(root)
    makers = {
        "proctor.toml": lambda p: os.symlink(root / "nowhere", p),
        ".proctor/config": lambda p: p.write_text("[guards]\n"),
        "policies": lambda p: p.mkdir(),
    }
    for name, make in makers.items():
        held.put(held.stamp(text, {}), "loaded", guard_modules=False)
        assert held.get(text, {}) == "loaded", name
        path = root / name
        make(path)
        assert held.get(text, {}) is None, name
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()


def test_a_proctor_setting_changed_in_the_same_mapping_drops_the_held_policy(
    tmp_path: Path,
) -> None:
    """The held policy state compares the settings it was loaded under: a ``PROCTOR_*``
    variable set, changed or removed in the very mapping a session reads (a plain dict is
    compared whole first) drops it; another variable changed keeps it."""
    import os

    from proctor.runtime.engine.held_policy import HeldPolicy

    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    held, text = HeldPolicy(), str(root)
    environ = {"PATH": "/bin", "PROCTOR_ALLOW_NO_POLICIES": "1"}
    changes = [
        lambda e: e.__setitem__("PROCTOR_ALLOW_NO_POLICIES", "0"),
        lambda e: e.__setitem__("PROCTOR_SANDBOX", "off"),
        lambda e: e.pop("PROCTOR_ALLOW_NO_POLICIES"),
    ]
    for change in changes:
        held.put(held.stamp(text, environ), "loaded", guard_modules=False)
        environ["PATH"] = environ["PATH"] + ":/usr/bin"  # not a setting: still kept
        assert held.get(text, environ) == "loaded"
        change(environ)
        assert held.get(text, environ) is None
    proxy = {**os.environ, "PROCTOR_X": "1"}  # a mapping that is no plain dict: picked
    from types import MappingProxyType

    view = MappingProxyType(proxy)
    held.put(held.stamp(text, view), "loaded", guard_modules=False)
    assert held.get(text, view) == "loaded"
    proxy["PROCTOR_X"] = "2"
    assert held.get(text, view) is None

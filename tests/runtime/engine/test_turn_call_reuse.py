"""What a session keeps between the turn calls of one run, and what it checks again each call.

A host's turn calls (``Session.turn_call``, an MCP client session's every call) find the turn
by its address alone (one row, not the run's every request), and are held to the workspace as
it is at each call: a package, a policy file, a key changed between two calls of one session
is seen by the second.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from proctor.errors import ResumeRefused
from tests.runtime.driver_support import (
    BLOCK_ECHO,
    age_past_racy_window,
    close_sessions,  # noqa: F401 - the autouse fixture
    edit_keeping_size_and_mtime,
    make_skill,
    make_workspace,
    session,
)

TWO_TURNS = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: first
        agent:
          instructions: Echo.
          calls: {tools: [echo]}
      - id: gate
        ask: {reason: Go on?}
      - id: second
        agent:
          instructions: Echo.
          calls: {tools: [echo]}
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "turns", TWO_TURNS)
    return root


def _refused(s: object, run_id: str, address: str) -> str:
    with pytest.raises(ResumeRefused) as caught:
        s.turn_call(run_id, address, "echo", {"text": "x"}, "c")  # type: ignore[attr-defined]
    return caught.value.code


def test_a_turn_call_finds_only_an_open_agent_turn_of_its_own_run(ws: Path) -> None:
    s = session(ws)
    env = s.run("turns", cwd=ws)
    run_id, other = env.run_id or "", s.run("turns", cwd=ws).run_id or ""
    assert env.status == "needs_agent"
    assert s.turn_call(run_id, "first", "echo", {"text": "x"}, "c1").ok
    assert _refused(s, run_id, "nowhere") == "unknown_address"
    (turn,) = env.requests
    answer = {"request_digest": turn["request_digest"], "value": {}}
    done = s.resume(run_id, {"answers": {"first": answer}})
    assert done.status == "needs_approval"  # the run waits at the gate: an approval
    assert _refused(s, run_id, "gate") == "unknown_address"  # a request, not an agent turn
    assert _refused(s, run_id, "first") == "unknown_address"  # the turn was answered: used
    # another run's open turn at the same address is not this run's
    assert s.turn_call(other, "first", "echo", {"text": "y"}, "c1").ok
    assert _refused(s, run_id, "second") == "unknown_address"  # not asked yet


ONE_TURN = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: turn
        agent:
          instructions: Echo.
          calls: {tools: [echo]}
"""


def _kept_then(root: Path, change: Callable[[Path], None]) -> str:
    """A turn call of a paused run, made twice in one session (the second from the package
    the session kept), then once more after ``change`` to the package folder: the code it
    is refused with."""
    folder = make_skill(root, "one", ONE_TURN)
    (folder / "lib").mkdir()
    (folder / "lib" / "notes.txt").write_text("notes\n")
    age_past_racy_window()
    s = session(root)
    run_id = s.run("one", cwd=root).run_id or ""
    assert s.turn_call(run_id, "turn", "echo", {"text": "a"}, "c1").ok
    assert s._held_skills._entries, "the session kept the package it loaded"
    assert s.turn_call(run_id, "turn", "echo", {"text": "b"}, "c2").ok
    change(folder)
    with pytest.raises(ResumeRefused) as caught:
        s.turn_call(run_id, "turn", "echo", {"text": "c"}, "c3")
    assert len(s.store.calls(run_id)) == 2  # nothing was called
    return caught.value.code


def test_a_package_file_edited_in_place_between_calls_is_refused(ws: Path) -> None:
    def edit(folder: Path) -> None:  # the same size and modification time: only ctime tells
        run_yaml = folder / "run.yaml"
        edit_keeping_size_and_mtime(run_yaml, run_yaml.read_text().replace("Echo.", "Ecko."))

    assert _kept_then(ws, edit) == "package_changed"


def test_a_file_deep_in_the_package_edited_between_calls_is_refused(ws: Path) -> None:
    def edit(folder: Path) -> None:
        edit_keeping_size_and_mtime(folder / "lib" / "notes.txt", "motes\n")

    assert _kept_then(ws, edit) == "package_changed"


def test_a_file_added_to_the_package_between_calls_is_refused(ws: Path) -> None:
    def add(folder: Path) -> None:
        before = (folder / "lib").stat()
        (folder / "lib" / "new.txt").write_text("")
        os.utime(folder / "lib", ns=(before.st_atime_ns, before.st_mtime_ns))

    assert _kept_then(ws, add) == "package_changed"


def test_a_package_file_removed_between_calls_is_refused(ws: Path) -> None:
    assert _kept_then(ws, lambda folder: (folder / "lib" / "notes.txt").unlink()) == (
        "package_changed"
    )


def test_a_package_written_within_the_racy_window_is_not_taken_on_stamps(tmp_path: Path) -> None:
    from proctor.runtime.engine.held_skills import HeldSkills, stamp_package

    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "SKILL.md").write_text("x")
    held = HeldSkills()
    key = (str(folder), "sha256:x", "main")
    held.put(key, stamp_package(str(folder), str(tmp_path)), ("skill", "method"))
    assert held.get(key, str(tmp_path)) is None  # changed just now: not its digest
    age_past_racy_window()
    held.put(key, stamp_package(str(folder), str(tmp_path)), ("skill", "method"))
    assert held.get(key, str(tmp_path)) == ("skill", "method")
    (folder / "SKILL.md").write_text("y")
    assert held.get(key, str(tmp_path)) is None


def test_a_racy_package_is_taken_only_while_its_files_digest_is_the_runs(tmp_path: Path) -> None:
    """An entry stamped within the racy window is kept, but taken only after its files are
    read again and their digest is the run's. An edit within the tick of the stamp leaves
    every stamped identity as it was: here the stamp is taken after the edit, as such an edit
    would leave it, and the digest of the bytes read before it catches the change."""
    from proctor.runtime.engine.held_skills import HeldSkills, stamp_package
    from proctor.runtime.skills import read_package

    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "SKILL.md").write_text("one")
    read = read_package(folder, "pkg")[1]
    held = HeldSkills()
    same = (str(folder), read, "main")
    held.put(same, stamp_package(str(folder), str(tmp_path)), ("skill", "method"))
    assert held.get(same, str(tmp_path)) == ("skill", "method")  # racy, the same bytes
    (folder / "SKILL.md").write_text("two")  # the same size
    edited = (str(folder), read, "other")  # the bytes read were "one"; the stamp sees "two"
    held.put(edited, stamp_package(str(folder), str(tmp_path)), ("skill", "method"))
    assert held.get(edited, str(tmp_path)) is None
    assert held.get(edited, str(tmp_path)) is None  # and it was let go


def _kept_policy_session(ws: Path) -> tuple[object, str]:
    make_skill(ws, "one", ONE_TURN)
    s = session(ws)
    run_id = s.run("one", cwd=ws).run_id or ""  # opens the run store in .proctor/
    age_past_racy_window()  # the package and the policy state may be kept from here on
    assert s.turn_call(run_id, "turn", "echo", {"text": "a"}, "c1").ok
    assert s._held_policy._entry is not None, "the session kept the policy state"
    assert s.turn_call(run_id, "turn", "echo", {"text": "b"}, "c2").ok
    return s, run_id


def test_a_policy_written_between_two_calls_of_one_session_holds_the_second(ws: Path) -> None:
    s, run_id = _kept_policy_session(ws)
    (ws / "policies").mkdir(exist_ok=True)
    (ws / "policies" / "team.yaml").write_text(BLOCK_ECHO)
    refused = s.turn_call(run_id, "turn", "echo", {"text": "c"}, "c3")  # type: ignore[attr-defined]
    assert refused.status == "refused", refused
    assert s.turn_call(run_id, "turn", "echo", {"text": "d"}, "c4", reason="asked").ok  # type: ignore[attr-defined]
    (ws / "policies" / "team.yaml").unlink()
    assert s.turn_call(run_id, "turn", "echo", {"text": "e"}, "c5").ok  # type: ignore[attr-defined]


def test_a_policy_edited_in_place_between_two_calls_holds_the_second(ws: Path) -> None:
    (ws / "policies").mkdir(exist_ok=True)
    team = ws / "policies" / "team.yaml"
    team.write_text(BLOCK_ECHO.replace("enforcement: block", "enforcement: warn "))
    s, run_id = _kept_policy_session(ws)
    edit_keeping_size_and_mtime(team, BLOCK_ECHO)  # only its change time tells
    refused = s.turn_call(run_id, "turn", "echo", {"text": "c"}, "c3")  # type: ignore[attr-defined]
    assert refused.status == "refused", refused


def test_a_guard_config_added_between_two_calls_is_loaded_by_the_second(ws: Path) -> None:
    s, run_id = _kept_policy_session(ws)
    (ws / "proctor.toml").write_text('[policy]\nguards = "guards.mine"\n')
    with pytest.raises(Exception) as caught:  # the module named is not there: refused
        s.turn_call(run_id, "turn", "echo", {"text": "c"}, "c3")  # type: ignore[attr-defined]
    assert getattr(caught.value, "code", None) in ("bad_guard_module", "guards_untrusted")


def test_a_recorded_authority_changed_between_calls_is_held_on_the_next(ws: Path) -> None:
    """The authority a driver parses is kept by its text: a run whose recorded authority
    changed (a standing approval granted, a limit narrowed) is held to the new one on the
    session's next call, even one with the same method."""
    make_skill(ws, "one", ONE_TURN)
    s = session(ws)
    run_id = s.run("one", cwd=ws).run_id or ""
    assert s.turn_call(run_id, "turn", "echo", {"text": "a"}, "c1").ok
    assert s.turn_call(run_id, "turn", "echo", {"text": "b"}, "c2").ok
    record = s.store.get_run(run_id)
    assert record is not None
    narrowed = {**record.data.get("authority", {}), "max_calls": 2}
    s.store.update_run(run_id, data={"authority": narrowed})
    third = s.turn_call(run_id, "turn", "echo", {"text": "c"}, "c3")
    assert third.status == "refused", third
    assert third.error is not None and third.error["code"] == "call_budget_exceeded", third


def test_the_kept_authority_is_narrowed_by_each_method_apart() -> None:
    from types import SimpleNamespace

    from proctor.runtime.engine.drive import _authorities

    doc = {"effects": "allow", "max_calls": 7}
    wide = _authorities(doc, SimpleNamespace(effects=None, reach=None))  # type: ignore[arg-type]
    none = _authorities(doc, SimpleNamespace(effects="none", reach=None))  # type: ignore[arg-type]
    assert (wide[1].effects, none[1].effects) == ("allow", "none")
    assert (
        _authorities({**doc, "max_calls": 3}, SimpleNamespace(effects=None, reach=None))[  # type: ignore[arg-type]
            1
        ].max_calls
        == 3
    )


def test_a_turn_call_leaves_no_reference_cycle(ws: Path) -> None:
    """A turn call's driver and governor are freed when it returns, by reference counting:
    cycles among them would leave each call's objects to the cyclic collector, whose full
    passes over a server's heap cost more than a call."""
    import gc

    make_skill(ws, "one", ONE_TURN)
    s = session(ws)
    run_id = s.run("one", cwd=ws).run_id or ""
    assert s.turn_call(run_id, "turn", "echo", {"text": "a"}, "c1").ok
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for n in range(3):
            assert s.turn_call(run_id, "turn", "echo", {"text": "b"}, f"c{n + 2}").ok
        gc.collect()
        left = sorted({type(o).__name__ for o in gc.garbage if not isinstance(o, tuple | dict)})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert "Governor" not in left and "RunDriver" not in left, left

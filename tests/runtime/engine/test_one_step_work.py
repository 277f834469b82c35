"""What a one-step run does once, and what it still reads afresh on every run.

A run's policy digest goes into its row with the run, in the start's transaction (the governor
then enforces the state loaded for it); its counters row too. Both are read afresh on every
run: a policy file edited between two runs of one session is the second run's policy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proctor.runtime.records.receipts import ReceiptStore
from tests.runtime.driver_support import (
    ONE_ECHO,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)


def _policy_digest(root: Path, receipt_id: str) -> str | None:
    body = json.loads(ReceiptStore(root / ".proctor" / "receipts").get(receipt_id) or b"")["body"]
    return body["policy_digest"]


def _second_run_traced(tmp_path: Path) -> tuple[Any, Any, list[str]]:
    """A session, the envelope of its second run of ``one`` (sealed, completed) and the SQL
    statements that run sent to the run store, in order."""
    root = make_workspace(tmp_path)
    make_skill(root, "one", ONE_ECHO)
    s = session(root)
    assert s.run("one", cwd=root).status == "sealed"
    begun: list[str] = []
    s.store._conn.set_trace_callback(begun.append)  # type: ignore[attr-defined]
    envelope = s.run("one", cwd=root)
    s.store._conn.set_trace_callback(None)  # type: ignore[attr-defined]
    assert envelope.status == "sealed" and envelope.outcome == "completed"
    return s, envelope, begun


def test_a_run_commits_its_start_step_and_seal_in_three_transactions(tmp_path: Path) -> None:
    s, envelope, begun = _second_run_traced(tmp_path)
    # the start (with its policy digest and counters), the step, the seal with the release of
    # the lease (the lease taken a moment before is checked before the seal, not renewed)
    assert [q for q in begun if q.startswith("BEGIN")] == ["BEGIN IMMEDIATE"] * 3
    assert not [q for q in begun if q.startswith("UPDATE leases SET expires_at")]
    # the store's newest audit anchor is read by the start's check, not again by the seal of a
    # process that counts its log's lines already
    anchors = [q for q in begun if "SELECT body FROM audit_anchor" in q]
    assert len(anchors) == 1
    # a run its driver's start created has no calls stored: none are read before the seal's
    sealing = next(n for n, q in enumerate(begun) if q.startswith("SELECT cursor, run_id"))
    assert not [q for q in begun[:sealing] if q.startswith("SELECT") and "FROM calls" in q]
    # what crashed drivers left is looked for once, by the start (its drive does not again),
    # in the one read its check makes of the anchor
    assert [q for q in begun if "FROM journal WHERE state = 'open'" in q] == anchors
    assert s.store.lease(envelope.run_id).holder == ""  # type: ignore[union-attr]
    assert not [q for q in begun if q.startswith("UPDATE runs") and "running" in q]
    assert not [q for q in begun if q.startswith("INSERT INTO run_counts") and "SELECT" in q[:60]]
    # each transaction reads a run's lease row once for all its fenced writes; the lease a
    # start took from nobody is not read back, only the seal's check reads it
    transactions: list[list[str]] = []
    for q in begun:
        if q.startswith("BEGIN"):
            transactions.append([])
        elif transactions:
            transactions[-1].append(q)
    for t in transactions:
        assert sum(q.startswith("SELECT epoch FROM leases") for q in t) <= 1
    assert len([q for q in begun if q.startswith("SELECT holder, epoch, expires_at")]) == 1


def test_a_runs_start_reads_back_nothing_it_wrote_itself(tmp_path: Path) -> None:
    """The start's transaction fences its ``started`` event with the lease epoch it wrote
    itself and numbers the event 1 (the run is its own), and the drive counts the new run's
    calls and steps as none: none of them is read back, and the run is recorded the same."""
    s, envelope, begun = _second_run_traced(tmp_path)
    start = begun[begun.index("BEGIN IMMEDIATE") : begun.index("COMMIT")]
    assert any(q.startswith("INSERT INTO leases") for q in start)
    assert not [q for q in start if q.startswith("SELECT epoch FROM leases")]
    assert not [q for q in start if q.startswith("SELECT MAX(seq) FROM events")]
    assert not [q for q in begun if "FROM run_counts" in q]
    events = s.store.events(envelope.run_id)
    assert [(e["seq"], e["kind"]) for e in events] == [(1, "started"), (2, "sealed")]
    counts = s.store.run_counts(envelope.run_id)
    assert (counts.calls, counts.admitted, counts.steps) == (1, 1, 1)


def test_a_policy_edited_between_two_runs_of_one_session_is_the_second_runs(
    tmp_path: Path,
) -> None:
    root = make_workspace(tmp_path)
    make_skill(root, "one", ONE_ECHO)
    (root / "policies").mkdir()
    policy = root / "policies" / "local.yaml"
    policy.write_text("id: first\nrules: []\n")
    s = session(root)
    first = s.run("one", cwd=root)
    digest_first = s.store.get_run(first.run_id).data["policy_digest"]  # type: ignore[union-attr]
    assert digest_first and digest_first == _policy_digest(root, str(first.receipt_id))
    policy.write_text("id: second\nrules: []\n")
    second = s.run("one", cwd=root)
    digest_second = s.store.get_run(second.run_id).data["policy_digest"]  # type: ignore[union-attr]
    assert digest_second and digest_second != digest_first
    assert digest_second == _policy_digest(root, str(second.receipt_id))
    assert digest_second == s.policy()[0].digest  # type: ignore[union-attr]


def test_a_policy_that_does_not_load_still_blocks_the_run(tmp_path: Path) -> None:
    root = make_workspace(tmp_path)
    make_skill(root, "one", ONE_ECHO)
    (root / "policies").mkdir()
    (root / "policies" / "bad.yaml").write_text("rules: [{id: 1}]\n")
    s = session(root)
    envelope = s.run("one", cwd=root)
    assert envelope.status == "sealed" and envelope.outcome == "blocked"
    assert envelope.seal_reason == "policy_refused"
    assert "policy_digest" not in s.store.get_run(envelope.run_id).data  # type: ignore[union-attr]


def _state_and_package(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace's state folder and a package folder outside it, both made."""
    state = tmp_path / ".proctor"
    state.mkdir()
    elsewhere = tmp_path / "skills" / "one"
    elsewhere.mkdir(parents=True)
    return state, elsewhere


def test_a_directive_run_is_told_without_resolving_a_folder_that_is_not_there(
    tmp_path: Path,
) -> None:
    from proctor.runtime.directives import is_directive_run

    state, elsewhere = _state_and_package(tmp_path)
    inside = state / "directive-packages" / "d1"
    # no directive-packages folder: a package that is there is no directive's; one whose
    # recorded folder is gone too is judged by its path (fail closed)
    assert not is_directive_run({"package_folder": str(elsewhere)}, state)
    assert is_directive_run({"package_folder": str(inside)}, state)
    inside.mkdir(parents=True)
    assert is_directive_run({"package_folder": str(inside)}, state)
    linked = tmp_path / "linked"
    linked.symlink_to(inside)
    assert is_directive_run({"package_folder": str(linked)}, state)
    assert not is_directive_run({"package_folder": str(elsewhere)}, state)


def test_a_package_folder_is_the_workspace_when_it_is_the_same_folder(tmp_path: Path) -> None:
    from proctor.runtime.connectors.catalog import _same_folder

    (tmp_path / "ws").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "ws")
    (tmp_path / "other").mkdir()
    assert _same_folder(tmp_path / "link", tmp_path / "ws")
    assert not _same_folder(tmp_path / "other", tmp_path / "ws")
    assert _same_folder(tmp_path / "gone" / "..", tmp_path)  # not there: by its real path
    assert not _same_folder(tmp_path / "gone", tmp_path / "ws")


SAYS = """minimum_proctor: 0.1.0
methods:
  main:
    description: Echoes hello.
    steps:
      - {id: s0, tool: echo, inputs: {text: hello}}
  hidden:
    description: Echoes hello under a secret's name.
    steps:
      - {id: s0, tool: echo, inputs: {text: hello}, result_as: password}
"""


def test_a_sealed_envelope_is_the_one_built_unless_scrubbing_changed_it(tmp_path: Path) -> None:
    from proctor.contracts.envelope import RunEnvelope

    root = make_workspace(tmp_path)
    make_skill(root, "says", SAYS)
    s = session(root)
    plain = s.run("says#main", cwd=root)
    assert plain.status == "sealed" and plain.outcome == "completed"
    assert plain == RunEnvelope.model_validate(plain.to_json())  # the same as read back
    assert "hello" in json.dumps(plain.to_json())
    # a result under a secret's name is scrubbed: the envelope returned is the scrubbed one
    hidden = s.run("says#hidden", cwd=root)
    assert hidden.status == "sealed" and hidden.outcome == "completed"
    assert "hello" not in json.dumps(hidden.to_json())
    kept = s.store.get_run(hidden.run_id)
    assert kept is not None and "hello" not in json.dumps(kept.data["envelope"])


def test_a_seal_counts_the_log_on_from_the_anchor_its_start_check_read(tmp_path: Path) -> None:
    """The seal of a run whose process counts nothing yet starts from the anchor the run's
    start check read, not reading it again: lines other runs added since are counted all the
    same, so the head the receipt commits is the log's."""
    from proctor.runtime.engine.sealing import _audit_head
    from proctor.runtime.engine.start import check_parts
    from proctor.runtime.records.audit import line_digest

    root = make_workspace(tmp_path)
    make_skill(root, "one", ONE_ECHO)
    assert session(root).run("one", cwd=root).status == "sealed"  # the store has an anchor
    late = session(root)
    check_parts(late)
    read = dict(late.audit.known_head or {})
    assert read["lines"] > 0
    assert session(root).run("one", cwd=root).status == "sealed"  # the log and anchor move on
    assert late.store.audit_anchor()["lines"] > read["lines"]  # type: ignore[index]
    begun: list[str] = []
    late.store._conn.set_trace_callback(begun.append)  # type: ignore[attr-defined]
    head = _audit_head(late)
    late.store._conn.set_trace_callback(None)  # type: ignore[attr-defined]
    assert not [q for q in begun if "audit_anchor" in q]
    lines = late.audit.path.read_bytes().splitlines()
    assert head == {"lines": len(lines), "last_digest": line_digest(lines[-1])}


ASKS = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: s0
        tool: echo
        inputs: {text: before}
      - id: a0
        ask: {reason: go on?}
      - id: e0
        tool: echo
        inputs: {text: $steps.s0.text}
    result_from: [e0]
"""


def test_a_resume_reads_the_runs_counts_once_and_goes_on_after_its_settled_steps(
    tmp_path: Path,
) -> None:
    """The governor's build and the drive's resume point share one read of the run's counts
    (nothing settles between them): the drive still starts after the steps settled before."""
    root = make_workspace(tmp_path)
    make_skill(root, "asks", ASKS)
    s = session(root)
    paused = s.run("asks", cwd=root)
    assert paused.status == "needs_approval"
    doc = json.loads(json.dumps(paused.answers_template))
    for entry in doc.get("approvals", {}).values():
        entry.update({"approved": True, "reason": "ok"})
    begun: list[str] = []
    s.store._conn.set_trace_callback(begun.append)  # type: ignore[attr-defined]
    envelope = s.resume(paused.run_id, doc)
    s.store._conn.set_trace_callback(None)  # type: ignore[attr-defined]
    assert envelope.status == "sealed" and envelope.outcome == "completed"
    assert envelope.result == {"text": "before"}
    assert len([q for q in begun if "FROM run_counts" in q]) == 1
    # s0 ran once, before the pause: its one call, and e0's
    assert [c.step_id for c in s.store.calls(paused.run_id)] == ["s0", "e0"]


def test_a_start_reads_no_counts_of_the_run_it_created_and_counts_its_calls(
    tmp_path: Path,
) -> None:
    """A run its start created a moment ago has nothing counted: the governor is built on
    zero counts without reading them, and the run's calls are counted on from there (its
    receipt budget and its next pause's window see the call made before)."""
    root = make_workspace(tmp_path)
    make_skill(root, "asks", ASKS)
    s = session(root)
    begun: list[str] = []
    s.store._conn.set_trace_callback(begun.append)  # type: ignore[attr-defined]
    paused = s.run("asks", cwd=root)
    s.store._conn.set_trace_callback(None)  # type: ignore[attr-defined]
    assert paused.status == "needs_approval"
    assert not [q for q in begun if "FROM run_counts" in q and q.lstrip().startswith("SELECT")]
    assert s.store.run_counts(paused.run_id).calls == 1
    assert [e.tool for e in paused.trace] == ["echo"]


def test_a_resume_reads_each_decided_request_once_before_it_records_the_decision(
    tmp_path: Path,
) -> None:
    """A resume reads the requests its document decides once, to admit it; the count of
    people a decided approval needs is taken from that read, not read again."""
    root = make_workspace(tmp_path)
    make_skill(root, "asks", ASKS)
    s = session(root)
    paused = s.run("asks", cwd=root)
    doc = json.loads(json.dumps(paused.answers_template))
    for entry in doc.get("approvals", {}).values():
        entry.update({"approved": True, "reason": "ok"})
    begun: list[str] = []
    s.store._conn.set_trace_callback(begun.append)  # type: ignore[attr-defined]
    s.resume(paused.run_id, doc)
    s.store._conn.set_trace_callback(None)  # type: ignore[attr-defined]
    by_key = [q for q in begun if "FROM requests WHERE" in q and "AND address = 'a0'" in q]
    # read to admit the document, and by the step asking again (its decision kept): not a
    # third time to count the people its approval needs
    assert len(by_key) == 2, by_key


def test_a_proctor_toml_made_between_two_runs_of_one_session_is_read_by_the_second(
    tmp_path: Path,
) -> None:
    """A run's start looks for ``proctor.toml`` once (with none there, its ``[notify]``,
    ``[egress]`` and ``[replay]`` readers would each answer their default): one written after
    a run is read by the next run's start, each section as its own reader reads it."""
    from proctor.errors import ConfigError

    root = make_workspace(tmp_path)
    make_skill(root, "one", ONE_ECHO)
    s = session(root)
    first = s.run("one", cwd=root)
    record = s.store.get_run(first.run_id)
    assert record is not None
    assert record.data["authority"]["egress"]["hosts"] == [] and "retain" not in record.data
    toml = '[egress]\nallow = ["api.example.com"]\n\n[replay]\nretain = true\n'
    (root / "proctor.toml").write_text(toml)
    second = s.run("one", cwd=root)
    assert second.status == "sealed" and second.outcome == "completed"
    record = s.store.get_run(second.run_id)
    assert record is not None
    assert record.data["authority"]["egress"]["hosts"] == ["api.example.com"]
    assert record.data["retain"] is True
    (root / "proctor.toml").write_text(toml + "\n[notify]\nstray = 3\n")
    with pytest.raises(ConfigError) as refused:
        s.run("one", cwd=root)
    assert refused.value.code == "notify_config_invalid"
    (root / "proctor.toml").unlink()  # gone again: every reader's default
    third = s.run("one", cwd=root)
    record = s.store.get_run(third.run_id)
    assert record is not None
    assert record.data["authority"]["egress"]["hosts"] == [] and "retain" not in record.data


def test_a_directive_packages_folder_is_followed_through_a_link_and_a_dangling_one_is_none(
    tmp_path: Path,
) -> None:
    from proctor.runtime.directives import is_directive_run

    state, elsewhere = _state_and_package(tmp_path)
    kept = tmp_path / "kept"
    (state / "directive-packages").symlink_to(kept)  # dangling: no folder is there
    assert not is_directive_run({"package_folder": str(elsewhere)}, state)
    (kept / "d1").mkdir(parents=True)  # the link now leads to the packages
    assert is_directive_run({"package_folder": str(kept / "d1")}, state)
    assert is_directive_run({"package_folder": str(state / "directive-packages" / "d1")}, state)
    assert not is_directive_run({"package_folder": str(elsewhere)}, state)


def test_lost_processes_are_reconciled_only_when_the_processes_folder_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from proctor.runtime.engine.bundles import recover_open_bundles
    from proctor.runtime.tools import procs_log

    seen: list[Path] = []
    monkeypatch.setattr(procs_log, "reconcile_lost", seen.append)
    state = tmp_path / ".proctor"
    state.mkdir()
    host: Any = SimpleNamespace(
        workspace=SimpleNamespace(state_dir=state),
        store=SimpleNamespace(journal_pending=lambda: False),
    )
    assert recover_open_bundles(host) == [] and seen == []
    (state / "processes").write_text("")  # a file by that name: not a folder
    assert recover_open_bundles(host) == [] and seen == []
    (state / "processes").unlink()
    (tmp_path / "procs").mkdir()
    (state / "processes").symlink_to(tmp_path / "procs")  # a link to a folder is one
    assert recover_open_bundles(host) == [] and seen == [state / "processes"]


def test_a_run_resolves_its_workspace_root_once_for_its_held_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held package, the held policy state and the held governing workspace are each
    handed out only while the workspace root is still its own real folder: a run asks the
    kernel once (at its start) and the three checks use that one answer."""
    import os

    root = make_workspace(tmp_path)
    make_skill(root, "one", ONE_ECHO)
    s = session(root)
    assert s.run("one", cwd=root).outcome == "completed"
    opened: list[str] = []
    real_open = os.open

    def counting(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & getattr(os, "O_PATH", 0) and str(path) == str(root):
            opened.append(str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting)
    assert s.run("one", cwd=root).outcome == "completed"
    if getattr(os, "O_PATH", 0) and os.path.isdir("/proc/self/fd"):
        assert len(opened) == 1


def test_a_workspace_root_swapped_for_a_link_between_runs_is_seen_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the run's one resolution answers is what its held checks compare: an answer that
    is not the root's own path (a link now stands there, or no folder) drops what each held."""
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine import held_policy, held_skills
    from proctor.runtime.engine import session as session_module

    root = make_workspace(tmp_path)
    make_skill(root, "one", ONE_ECHO)
    s = session(root)
    assert s.run("one", cwd=root).outcome == "completed"
    seen: list[tuple[str, Any]] = []

    def spy(name: str, cls: Any, method: str) -> None:
        real = getattr(cls, method)

        def spied(*args: Any, **kwargs: Any) -> Any:
            seen.append((name, kwargs.get("real_root", args[3] if len(args) > 3 else "")))
            return real(*args, **kwargs)

        monkeypatch.setattr(cls, method, spied)

    spy("skills", held_skills.HeldSkills, "get")
    spy("policy", held_policy.HeldPolicy, "get")
    spy("governing", Workspace, "governing")
    derived: list[Any] = []
    real_derived = Workspace._derived
    monkeypatch.setattr(
        Workspace, "_derived", lambda *a, **k: derived.append(1) or real_derived(*a, **k)
    )
    monkeypatch.setattr(session_module, "real_folder", lambda path: str(tmp_path / "moved"))
    assert s.run("one", cwd=root).outcome == "completed"
    assert {name for name, _ in seen} == {"skills", "policy", "governing"}
    assert {given for _, given in seen} == {str(tmp_path / "moved")}
    assert derived  # the held governing workspace was not handed out


def test_a_journal_left_open_is_rolled_back_by_the_next_runs_start(tmp_path: Path) -> None:
    """The start's check reads the audit anchor and whether a bundle journal is open in one
    read; a journal a crashed driver left open is then rolled back before the run starts, and
    the next run's start, finding none open, reads no journal."""
    from proctor.runtime.records.runs import JournalRecord

    root = make_workspace(tmp_path)
    make_skill(root, "one", ONE_ECHO)
    s = session(root)
    assert s.run("one", cwd=root).status == "sealed"
    s.store.journal_open(JournalRecord("b-crashed", "r-crashed", "open", []))
    begun: list[str] = []
    s.store._conn.set_trace_callback(begun.append)  # type: ignore[attr-defined]
    first = s.run("one", cwd=root)
    s.store._conn.set_trace_callback(None)  # type: ignore[attr-defined]
    assert first.status == "sealed" and s.store.journal_pending() == []
    started = [
        line
        for line in map(json.loads, (root / ".proctor" / "audit.jsonl").read_text().splitlines())
        if line["event"] == "run_started" and line["run_id"] == first.run_id
    ]
    assert started[0]["recovered_bundles"] == ["b-crashed"]
    assert any(q.startswith("SELECT bundle_id, run_id, state, entries FROM journal") for q in begun)
    begun.clear()
    s.store._conn.set_trace_callback(begun.append)  # type: ignore[attr-defined]
    assert s.run("one", cwd=root).status == "sealed"
    s.store._conn.set_trace_callback(None)  # type: ignore[attr-defined]
    assert not any(q.startswith("SELECT bundle_id") for q in begun)

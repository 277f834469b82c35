"""The row text of a stored document: a value spliced in from its own encoding is the same text."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.receipts.canonical import digest
from proctor.runtime.records.rows import dumps, dumps_member

leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(), values, max_size=8), st.text(), values)
def test_a_spliced_member_gives_the_text_dumps_gives(
    document: dict[str, Any], key: str, member: Any
) -> None:
    document[key] = member
    assert dumps_member(document, key, dumps(member)) == dumps(document)


def test_a_governed_read_stores_the_text_of_its_settled_record(tmp_path: Path) -> None:
    from proctor.core.authority import Authority
    from proctor.receipts.signing import signer_from_seed
    from proctor.runtime.admission.governor import CallSpec, Governor
    from proctor.runtime.boundary.sanitize import Sanitizer
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session
    from proctor.runtime.records.runs import RunRecord

    (tmp_path / ".proctor").mkdir()
    (tmp_path / "notes.txt").write_text('a line of notes, "quoted" and ünïcode\n' * 60)
    session = Session(
        Workspace(tmp_path),
        environ={"PROCTOR_HOME": str(tmp_path / ".home")},
        signer=signer_from_seed(b"\x02" * 32),
    )
    session.store.create_run(RunRecord(run_id="r", skill="k", method="m"))
    policies, guards, _ = session.policy()
    governor = Governor(
        run_id="r", workspace=session.workspace, store=session.store, tools=session.tools,
        policies=policies, guards=guards, audit=session.audit, sanitizer=Sanitizer(),
        authority=Authority(),
    )  # fmt: skip
    outcome = governor.call(
        CallSpec("fs.read", {"path": "notes.txt"}, frozenset({"fs.read"}), step_id="s")
    )
    assert outcome.ok and outcome.outputs_digest == digest(outcome.result)
    session.store.flush()
    db = sqlite3.connect(tmp_path / ".proctor" / "runs.sqlite")
    try:
        (text,) = db.execute("SELECT result FROM calls WHERE call_id = 's/1'").fetchone()
    finally:
        db.close()
    (recorded,) = session.store.calls("r")
    assert text == dumps(recorded.result)
    assert recorded.result["result"] == outcome.result
    session.close()

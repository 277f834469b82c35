"""Child runs and fan-out: the judged workflow of three skills, limits, pauses, failures."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from proctor.receipts.canonical import digest
from proctor.receipts.verify import verify_tree
from proctor.runtime.engine.compose import GAUGE, child_run_id
from tests.runtime.driver_support import (
    authority,
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

# The instrument: each child's command takes a slot in a file-locked counter, records the
# most slots ever held at once, sleeps, and gives its slot back (a real process per child).
GAUGE_SCRIPT = """import fcntl, sys, time, pathlib
state = pathlib.Path(sys.argv[1])
def update(delta):
    with open(state.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        now, peak = (json.loads(state.read_text()) if state.exists() else [0, 0])
        now += delta
        state.write_text(json.dumps([now, max(peak, now)]))
import json
update(1)
time.sleep(0.15)
update(-1)
print(sys.argv[2])
"""

FLOW = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {items: {type: array, items: {type: string}}}
      required: [items]
    steps:
      - id: prepare
        skill: ../prep
        inputs: {items: $input.items}
      - id: draft
        skill: ../leaf
        for_each: $input.items
        inputs: {text: $item, n: $index}
      - id: check
        skill: ../prep
        inputs: {items: $steps.draft}
    result_from: [draft, check]
"""

PREP = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {items: {type: array}}
    steps:
      - id: pass
        tool: data.digest
        inputs: {value: $input.items}
    result_from: [pass]
"""

LEAF = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {text: {type: string}, n: {type: integer}}
      required: [text, n]
    steps:
      - id: work
        tool: command.execute
        inputs: {argv: [python3, tools/gauge.py, gauge.json, $input.text]}
      - id: say
        tool: echo
        inputs: {text: $input.text}
    result_from: [say]
"""

GATED = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {text: {type: string}, n: {type: integer}}
      required: [text, n]
    steps:
      - id: work
        tool: command.execute
        inputs: {argv: [python3, tools/gauge.py, gauge.json, $input.text]}
      - id: post
        tool: fs.write
        reason: Write the child's note.
        inputs: {path: $input.text, content: "posted\\n", create: true}
      - id: say
        tool: echo
        inputs: {text: $input.text}
    result_from: [say]
"""

ITEMS = [f"note-{n:02d}.txt" for n in range(20)]


def _workspace(tmp_path: Path, leaf: str = LEAF) -> Path:
    root = make_workspace(tmp_path)
    (root / "tools" / "gauge.py").write_text(GAUGE_SCRIPT)
    make_skill(root, "flow", FLOW)
    make_skill(root, "prep", PREP)
    make_skill(root, "leaf", leaf)
    return root


def _peak(root: Path) -> int:
    return int(json.loads((root / "gauge.json").read_text())[1])


def _verify(root: Path, receipt_id: str | None) -> Any:
    from proctor.receipts.signing import signer_from_seed
    from proctor.runtime.records.receipts import ReceiptStore

    store = ReceiptStore(root / ".proctor" / "receipts")
    key = signer_from_seed(bytes(range(32))).public_key
    return verify_tree(receipt_id, store.get, [key])


def _echo(value: Any) -> Any:
    return {"text": value}


def test_fan_out_of_twenty_under_four(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    s = session(root)
    GAUGE.reset()
    env = s.run(
        str(root / "skills" / "flow"),
        inputs={"items": ITEMS},
        authority=authority(effects="allow", reach="workspace", max_concurrency=4),
    )
    assert env.status == "sealed" and env.outcome == "completed", env.refusal
    assert env.result["draft"] == [_echo(item) for item in ITEMS]
    assert env.result["check"] == {"digest": digest(env.result["draft"])}
    # never more than 4 at once, seen by the children's own processes and by the runtime
    assert 2 <= _peak(root) <= 4
    assert 2 <= GAUGE.peak <= 4
    result = _verify(root, env.receipt_id)
    assert result.status == "verified", result
    # 1 run + 3 steps + two prep children (run, step, call each) + 20 leaf children (run,
    # 2 steps, 2 calls each): every child is committed once
    assert result.receipts == 1 + 3 + 2 * 3 + 20 * 5
    store = s.store
    for n in range(20):
        child = store.get_run(child_run_id(env.run_id, "draft", n))
        assert child is not None and child.status == "sealed"
        assert "parent" not in json.dumps(child.data)


def test_a_failing_child_reason_reaches_the_parent(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    items = list(ITEMS[:6])
    items[3] = "../outside.txt"  # the leaf writes nothing, but the gauge argv is fine: use echo
    bad = LEAF.replace(
        "      - id: say\n",
        "      - id: check\n        tool: fs.read\n        inputs: {path: $input.text}\n"
        "      - id: say\n",
    )
    make_skill(root, "leaf", bad)
    for item in items:
        if not item.startswith(".."):
            (root / item).write_text("x\n")
    env = session(root).run(
        str(root / "skills" / "flow"),
        inputs={"items": items},
        authority=authority(effects="allow", reach="workspace", max_concurrency=4),
    )
    assert env.status == "sealed" and env.outcome in ("failed", "blocked")
    assert env.refusal is not None and env.refusal.step == "draft"
    assert "child run 3 of step 'draft'" in env.refusal.message
    result = _verify(root, env.receipt_id)
    assert result.status == "verified", result


def test_a_pause_in_child_seven_is_answered_at_the_root_and_runs_once(tmp_path: Path) -> None:
    root = _workspace(tmp_path, leaf=GATED)
    s = session(root)
    standing: list[dict[str, Any]] = [
        {"edits": {"paths": [item for item in ITEMS if item != ITEMS[7]]}},
        {"commands": {"argv_prefix": ["python3", "tools/gauge.py"]}},
    ]
    env = s.run(
        str(root / "skills" / "flow"),
        inputs={"items": ITEMS},
        authority=authority(
            effects="ask", reach="workspace", max_concurrency=4, standing_approvals=standing
        ),
    )
    assert env.status == "needs_approval", env.refusal
    addresses = [r["address"] for r in env.requests]
    assert addresses == ["draft/7#post"]
    assert not (root / ITEMS[7]).exists()
    assert all((root / item).exists() for item in ITEMS if item != ITEMS[7])
    doc = json.loads(json.dumps(env.answers_template))
    doc["approvals"]["draft/7#post"].update(approved=True, reason="fine")
    done = s.resume(env.run_id, doc)
    assert done.status == "sealed" and done.outcome == "completed", done.refusal
    assert done.result["draft"] == [_echo(item) for item in ITEMS]
    assert (root / ITEMS[7]).read_text() == "posted\n"
    child = child_run_id(env.run_id, "draft", 7)
    writes = [c for c in s.store.calls(child) if c.tool == "fs.write"]
    assert len(writes) == 1  # the approved change ran once
    commands = [c for c in s.store.calls(child) if c.tool == "command.execute"]
    assert len(commands) == 1  # and the step before it was not run again
    assert _verify(root, done.receipt_id).status == "verified"
    again = s.resume(env.run_id, {"schema": "proctor.resume.v1"})
    assert again.receipt_id == done.receipt_id


def test_max_fanout_refuses_before_any_child_starts(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    env = session(root).run(
        str(root / "skills" / "flow"),
        inputs={"items": ITEMS},
        authority=authority(effects="allow", reach="workspace", max_fanout=5),
    )
    assert env.status == "sealed" and env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "fanout_exceeded"
    assert not (root / "gauge.json").exists()  # no leaf child ran


NEST = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: down
        skill: {child}
        inputs: {inputs}
"""


def test_max_child_depth_refuses_a_grandchild(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    make_skill(root, "top", NEST.format(child="../middle", inputs="{}"))
    make_skill(
        root, "middle", NEST.format(child="prep", inputs="{items: [1]}")
    )  # a catalog name, from skills/
    s = session(root)
    env = s.run(
        str(root / "skills" / "top"),
        authority=authority(effects="allow", reach="workspace", max_child_depth=1),
    )
    assert env.status == "sealed" and env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "child_depth_exceeded"
    assert "child run 0 of step 'down'" in env.refusal.message
    middle = s.store.get_run(child_run_id(env.run_id, "down", 0))
    assert middle is not None and middle.outcome == "blocked"
    assert s.store.get_run(child_run_id(middle.run_id, "down", 0)) is None
    assert _verify(root, env.receipt_id).status == "verified"
    deeper = session(root).run(
        str(root / "skills" / "top"),
        authority=authority(effects="allow", reach="workspace", max_child_depth=2),
    )
    assert deeper.outcome == "completed", deeper.refusal


def test_a_skill_that_calls_itself_is_stopped_at_the_depth_ceiling_and_every_run_seals(
    tmp_path: Path,
) -> None:
    from proctor.core.budget import MAX_CHILD_DEPTH

    # No authority states max_child_depth: only proctor's own ceiling stops the recursion,
    # which used to run the driver out of stack and leave every run it had started running.
    root = make_workspace(tmp_path)
    make_skill(root, "again", NEST.format(child=".", inputs="{}"))
    s = session(root)
    env = s.run(str(root / "skills" / "again"))
    assert env.status == "sealed" and env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "child_depth_exceeded"
    assert f"at most {MAX_CHILD_DEPTH} levels below the root" in env.refusal.message
    runs = s.store.list_runs(limit=100)
    assert len(runs) == MAX_CHILD_DEPTH + 1
    assert all(run.status == "sealed" and run.outcome == "blocked" for run in runs)
    result = _verify(root, env.receipt_id)
    assert result.status == "verified" and result.depth == 2 * MAX_CHILD_DEPTH + 1


def test_a_bad_host_ceiling_is_refused_at_start(tmp_path: Path) -> None:
    from proctor.errors import ConfigError

    root = _workspace(tmp_path)
    s = session(root)
    s.environ = {**s.environ, "PROCTOR_MAX_CONCURRENCY": "0"}
    with pytest.raises(ConfigError) as caught:
        s.run(str(root / "skills" / "flow"), inputs={"items": ITEMS})
    assert caught.value.code == "max_concurrency_invalid"
    assert s.store.list_runs() == []


def test_the_host_ceiling_narrows_the_width(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    s = session(root)
    s.environ = {**s.environ, "PROCTOR_MAX_CONCURRENCY": "1"}
    env = s.run(
        str(root / "skills" / "flow"),
        inputs={"items": ITEMS[:4]},
        authority=authority(effects="allow", reach="workspace", max_concurrency=4),
    )
    assert env.outcome == "completed"
    assert _peak(root) == 1


def test_a_stop_reaches_every_child_and_a_resume_runs_each_command_once(tmp_path: Path) -> None:
    import threading

    from proctor.runtime.engine.host import RunInterrupted

    root = _workspace(tmp_path)
    (root / "tools" / "gauge.py").write_text(
        GAUGE_SCRIPT.replace(
            "print(sys.argv[2])", "open('ran.log', 'a').write(sys.argv[2] + '\\n')"
        )
    )
    s = session(root)
    timer = threading.Timer(0.3, s.request_stop)  # what SIGTERM does to a session
    timer.start()
    try:
        with pytest.raises(RunInterrupted):
            s.run(
                str(root / "skills" / "flow"),
                inputs={"items": ITEMS[:12]},
                authority=authority(effects="allow", reach="workspace", max_concurrency=4),
            )
    finally:
        timer.cancel()
    (run,) = [r for r in s.store.list_runs() if r.skill == "flow"]
    assert run.status == "stopped"
    started = [s.store.get_run(child_run_id(run.run_id, "draft", n)) for n in range(12)]
    assert any(c is None or c.status != "sealed" for c in started)  # not every child ran
    ran_before = (root / "ran.log").read_text().split() if (root / "ran.log").exists() else []
    assert len(ran_before) < 12
    fresh = session(root)  # another process: its clock goes on after the first one's
    later = itertools.count()
    fresh.clock = lambda: datetime(2026, 1, 3, tzinfo=UTC) + timedelta(milliseconds=next(later))
    done = fresh.resume(run.run_id, {"schema": "proctor.resume.v1"})
    assert done.outcome == "completed", done.refusal
    ran = (root / "ran.log").read_text().split()
    assert sorted(ran) == sorted(ITEMS[:12])  # each child's command ran exactly once
    assert _verify(root, done.receipt_id).status == "verified"


def test_a_child_that_cannot_be_read_fails_the_step_with_its_code(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    make_skill(root, "top", NEST.format(child="../missing", inputs="{}"))
    env = session(root).run(str(root / "skills" / "top"))
    assert env.status == "sealed" and env.outcome == "failed"
    assert env.refusal is not None and env.refusal.code == "skill_not_found"
    assert _verify(root, env.receipt_id).status == "verified"


def test_reuse_takes_an_earlier_sealed_child_and_its_receipt_names_the_source(
    tmp_path: Path,
) -> None:
    from proctor.receipts.model import parse_envelope
    from proctor.runtime.records.receipts import ReceiptStore

    root = _workspace(tmp_path)
    reusing = FLOW.replace("        for_each: $input.items\n", "        for_each: $input.items\n"
                           "        reuse: {max_age_seconds: 3600}\n")  # fmt: skip
    make_skill(root, "flow", reusing)
    s = session(root)
    grant = authority(effects="allow", reach="workspace", max_concurrency=4)
    first = s.run(str(root / "skills" / "flow"), inputs={"items": ITEMS[:3]}, authority=grant)
    assert first.outcome == "completed"
    before = (root / "gauge.json").read_text()
    (root / "gauge.json").unlink()
    again = s.run(str(root / "skills" / "flow"), inputs={"items": ITEMS[:3]}, authority=grant)
    assert again.outcome == "completed" and again.result == first.result
    assert not (root / "gauge.json").exists() and before  # no child command ran again
    store = ReceiptStore(root / ".proctor" / "receipts")
    for n in range(3):
        source = s.store.get_run(child_run_id(first.run_id or "", "draft", n))
        reused = s.store.get_run(child_run_id(again.run_id or "", "draft", n))
        assert source is not None and reused is not None
        assert reused.data["reused_from"]["run_id"] == source.run_id
        body = parse_envelope(store.get(reused.receipt_id or "") or b"").body
        assert body["reused_from"] == source.receipt_id and body["children"] == []
    assert _verify(root, again.receipt_id).status == "verified"
    other = s.run(str(root / "skills" / "flow"), inputs={"items": ITEMS[3:4]}, authority=grant)
    assert other.outcome == "completed" and (root / "gauge.json").exists()  # new inputs: ran

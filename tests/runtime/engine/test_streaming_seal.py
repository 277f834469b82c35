"""The seal reads a run a page at a time and writes the tree it always wrote.

Runs are recorded straight into a real run store (every shape a seal groups: steps settled out
of the order they started, interleaved parallel steps, a step that never
settled, a claim never settled, a step of more calls than a page and a segment hold, a run of
more steps than a segment holds), sealed with a fixed key and clock, and compared with what
the seal made before it streamed (the ids below were made by the previous seal, from these
same records): every receipt but the run's (which commits the audit log's head), and the
small run's envelope, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from proctor.receipts.canonical import digest
from proctor.runtime.records.runs import CallRecord, RunRecord
from tests.receipt_files import stored
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_workspace,
    session,
)

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _at(ms: int) -> str:
    return (T0 + timedelta(milliseconds=ms)).isoformat()


def _call(
    run_id: str, n: int, step: str | None, status: str = "completed", **extra: Any
) -> CallRecord:
    result: dict[str, Any] = {"status": status, "started_at": _at(n), "ended_at": _at(n + 1)}
    if status == "completed":
        result["result"] = {"n": n}
    elif status == "failed":
        result["error"] = {"code": "tool_failed", "message": f"boom {n}"}
    result.update(extra)
    return CallRecord(run_id, f"c{n}", step, "echo", "settled", digest({"n": n}), result=result)


def _step(store: Any, run_id: str, step_id: str, ms: int, **extra: Any) -> None:
    body = {"outcome": "completed", "started_at": _at(ms), "ended_at": _at(ms + 5), **extra}
    store.settle_step(run_id, step_id, body)


def _run(store: Any, run_id: str) -> RunRecord:
    data = {"started_at": _at(0), "inputs_digest": digest({}), "authority": {"effects": "allow"}}
    return store.create_run(RunRecord(run_id=run_id, skill="shapes", method="main", data=data))


def record_small(store: Any) -> RunRecord:
    """Every grouping a seal makes, in a dozen calls."""
    run = _run(store, "small")
    warned = {"verdicts": [{"rule_id": "r1", "effect": "warned", "message": "careful"}]}
    refused = {
        "verdicts": [{"rule_id": "r2", "effect": "refused", "code": "denied", "message": "no"}],
        "error": {"code": "policy_refused", "message": "no"},
    }
    for call in (
        _call("small", 1, "a"),
        _call("small", 2, "a", **warned),
        _call("small", 3, "a", "failed"),
        _call("small", 4, "p"),
        _call("small", 5, "q", "refused", **refused),
        _call("small", 6, "a"),
        _call("small", 7, "p", approved_by="standing_approvals:x"),
        _call("small", 8, "k"),
        _call("small", 9, "q"),
        _call("small", 10, "p"),
        _call("small", 11, "k"),
    ):
        store.record_call(call)
    store.claim_call(CallRecord("small", "c12", "k", "fs.write", "claimed", digest({"n": 12})))
    _step(store, "small", "a", 1, spend_micro_usd=7)
    _step(store, "small", "q", 9)  # q settled before p, which started first
    _step(store, "small", "p", 4, already_done="sha256:" + "1" * 64)
    return run


def record_big(store: Any) -> RunRecord:
    """A step of 2,100 calls (three segments, three pages) and 1,030 steps of one call."""
    run = _run(store, "big")
    for n in range(2100):
        store.record_call(_call("big", n, "many"))
    _step(store, "big", "many", 0)
    for i in range(1030):
        store.record_call(_call("big", 3000 + i, f"s{i}"))
        _step(store, "big", f"s{i}", 3000 + i)
    return run


def seal_recorded(root: Path, which: str) -> dict[str, Any]:
    """Record the ``which`` run, seal it, and say what it made."""
    from proctor.runtime.engine.sealing import seal_run

    s = session(make_workspace(root), clock=lambda: T0 + timedelta(hours=1))
    record = (record_small if which == "small" else record_big)(s.store)
    envelope = seal_run(s, record, outcome="completed", seal_reason=None, result={"ok": 1},
                        refusal=None)  # fmt: skip
    receipts = stored(root / ".proctor" / "receipts")
    below = sorted(
        rid for rid, data in receipts.items() if json.loads(data)["body"]["kind"] != "run"
    )
    doc = envelope.to_json()
    row = s.store.get_run(record.run_id)
    assert row is not None
    kept = dict(row.data["envelope"])
    for part in (doc, kept):
        part.pop("receipt_id")
    return {
        "receipts": len(receipts),
        "below_run": hashlib.sha256("\n".join(below).encode()).hexdigest(),
        "envelope": hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest(),
        "kept": hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest(),
        "trace": len(doc["trace"]),
        "trace_omitted": doc.get("trace_omitted"),
    }


# made by the seal before it read a page at a time, from the same records (see the module)
SMALL_BEFORE = {
    "receipts": 17,
    "below_run": "fda5b681a32e6811e58c87f7337ef02222cfd8344c34abff77a1b9723e97d85f",
    "envelope": "28f2d5c97a7b8183b50ec00a1ab32212721882190e116a0893c6524e93c90139",
    "kept": "28f2d5c97a7b8183b50ec00a1ab32212721882190e116a0893c6524e93c90139",
    "trace": 11,
    "trace_omitted": None,
}
BIG_BELOW_RUN_BEFORE = "e78eb28e19046a3124cc5f93fef29e896d5762d2b40fad21738299a122edc39f"


def test_a_small_run_seals_to_the_same_receipts_and_envelope_as_before(tmp_path: Path) -> None:
    assert seal_recorded(tmp_path, "small") == SMALL_BEFORE


def test_a_run_of_many_pages_and_segments_seals_to_the_same_receipts(tmp_path: Path) -> None:
    made = seal_recorded(tmp_path, "big")
    # 1 run + 2 run-level segments + 1,031 steps + 3 segments + 3,130 calls
    assert made["receipts"] == 4167
    assert made["below_run"] == BIG_BELOW_RUN_BEFORE
    assert (made["trace"], made["trace_omitted"]) == (1000, 3130 - 1000)


def test_a_long_trace_shows_its_two_ends_and_every_reader_rebuilds_it(tmp_path: Path) -> None:
    from proctor.runtime.engine.sealing import seal_run
    from proctor.runtime.engine.stored_envelope import envelope_doc

    s = session(make_workspace(tmp_path), clock=lambda: T0 + timedelta(hours=1))
    record = record_big(s.store)
    envelope = seal_run(s, record, outcome="completed", seal_reason=None, result=None,
                        refusal=None)  # fmt: skip
    ids = [e.call_id for e in envelope.trace]
    everything = [f"c{n}" for n in range(2100)] + [f"c{3000 + i}" for i in range(1030)]
    assert ids == everything[:500] + everything[-500:]
    assert envelope.trace_omitted == len(everything) - 1000
    row = s.store.get_run("big")
    assert row is not None
    assert row.data["envelope"]["trace"] == {"stored": "calls", "count": 3130}
    assert envelope_doc(s.store, row) == envelope.to_json()
    assert s.envelope("big").to_json() == envelope.to_json()


def test_the_window_places_calls_by_claim_order_whatever_order_they_come_in() -> None:
    from proctor.runtime.engine.trace_window import TraceWindow

    window = TraceWindow(limit=6, ends=2)
    calls = [_call("r", n, "a") for n in range(10)]
    for n, call in enumerate(calls):
        call.seq = n + 1
    for call in calls[5:] + calls[:5]:  # a later step's calls first
        window.add(call)
    assert [c.call_id for c in window.shown()] == ["c0", "c1", "c8", "c9"]
    assert (window.count, window.omitted, window.calls) == (10, 6, 10)
    whole = TraceWindow(limit=6, ends=2).extend(calls[:6])
    assert [c.call_id for c in whole.shown()] == [f"c{n}" for n in range(6)]
    assert whole.omitted is None


AGENT_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: turn
        agent:
          instructions: Echo many times.
          calls: {tools: [echo]}
          output: {type: object}
"""

KILLED = """
import sys
from pathlib import Path
from proctor.runtime.admission.governor import CallSpec
from proctor.runtime.engine import sealing
from tests.runtime.driver_support import session

sealing.SEAL_BATCH = 64  # several batches for a few hundred receipts


class Echoes:
    def drive_turn(self, turn, call):
        for i in range(300):
            call(CallSpec("echo", {"text": f"call {i}"}, frozenset(), reason="test"))
        return {}


session(Path(sys.argv[1]), agent_driver=Echoes()).run("echoes", cwd=Path(sys.argv[1]))
"""


def test_a_seal_killed_between_its_batches_seals_again_on_resume(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from proctor.receipts.signing import signer_from_seed
    from proctor.runtime.records.verify_folder import verify_receipt
    from tests.runtime.driver_support import make_skill

    root = make_workspace(tmp_path)
    make_skill(root, "echoes", AGENT_YAML)
    env = {
        **os.environ,
        "PROCTOR_TEST_HOOKS": "1",
        "PROCTOR_TEST_KILL_AT": "receipts.batch_synced:2",
    }
    env.pop("PROCTOR_DATABASE_URL", None)
    done = subprocess.run([sys.executable, "-c", KILLED, str(root)], env=env, cwd=Path.cwd(),
                          capture_output=True, check=False)  # fmt: skip
    assert done.returncode == -9, done.stderr  # killed with some batches of its seal written
    folder = root / ".proctor" / "receipts"
    assert 64 <= len(stored(folder)) < 300
    s = session(root)
    (record,) = s.store.list_runs()
    assert record.status != "sealed"
    envelope = s.resume(record.run_id, {})
    assert (envelope.status, envelope.outcome) == ("sealed", "completed")
    # the run, its step and 300 calls (fewer than a segment holds)
    assert len(stored(folder)) == 1 + 1 + 300
    key = signer_from_seed(bytes(range(32))).public_key  # the key of every test session
    checked = verify_receipt(envelope.receipt_id or "", receipts_dir=folder, public_key=key)
    assert (checked.status, checked.receipts) == ("verified", 302)
    assert len(envelope.trace) == 300 and envelope.trace_omitted is None

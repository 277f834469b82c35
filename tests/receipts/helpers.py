"""Shared builders for receipt tests: a fixed key, a fixed clock, bodies and small trees."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from proctor.receipts.model import RECEIPT_SCHEMA, Subject
from proctor.receipts.signing import Signer, signer_from_seed
from proctor.receipts.writer import ReceiptWriter, Ref, seal
from proctor.runtime.records.receipts import ReceiptStore

# RFC 8032 section 7.1 TEST 1 seed: a public, fixed key so receipts are reproducible.
SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
OTHER_SEED = bytes.fromhex("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb")
T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
PKG = "sha256:" + "ab" * 32


def signer() -> Signer:
    return signer_from_seed(SEED)


def other_signer() -> Signer:
    return signer_from_seed(OTHER_SEED)


def fixed_clock() -> datetime:
    return T0


def body(
    kind: str,
    key_id: str,
    children: list[str] | None = None,
    *,
    step_id: str = "s1",
    **extra: Any,
) -> dict[str, Any]:
    """A valid receipt body; ``children`` are receipt ids (committed with equal digests)."""
    subject = {
        "skill": "hello",
        "package_digest": PKG,
        "method": "main",
        "step_id": None if kind == "run" else step_id,
        "tool": "echo" if kind == "call" else None,
    }
    out: dict[str, Any] = {
        "schema": RECEIPT_SCHEMA,
        "kind": kind,
        "subject": subject,
        "inputs_digest": None,
        "outputs_digest": None,
        "outcome": "completed",
        "seal_reason": None,
        "authority_digest": None,
        "policy_digest": None,
        "verdicts": [],
        "started_at": "2026-01-02T03:04:05.000000Z",
        "ended_at": "2026-01-02T03:04:05.000000Z",
        "children": [{"receipt_id": c, "body_digest": c} for c in children or []],
        "key_id": key_id,
    }
    out.update(extra)
    return out


def put(folder: Path, receipt_id: str, data: bytes) -> None:
    (folder / f"{receipt_id.removeprefix('sha256:')}.json").write_bytes(data)


def write_sealed(folder: Path, body_: dict[str, Any], s: Signer, *, signed: bool = True) -> str:
    rid, data = seal(body_, s, signed=signed)
    put(folder, rid, data)
    return rid


def small_tree(store: ReceiptStore, s: Signer | None = None) -> dict[str, Ref]:
    """run -> [step a -> [call a1, call a2 -> run child -> step c], step b -> [call b1]]."""
    w = ReceiptWriter(store, s or signer(), clock=fixed_clock)
    sub = Subject("hello", PKG, "main")
    refs: dict[str, Ref] = {}
    refs["a1"] = w.call(
        Subject("hello", PKG, "main", "a", "echo"),
        outcome="completed",
        started_at=T0,
        inputs_digest="sha256:" + "01" * 32,
    )
    refs["c"] = w.step(Subject("child", PKG, "main", "c"), outcome="completed", started_at=T0)
    refs["child"] = w.run(
        Subject("child", PKG, "main"), outcome="completed", started_at=T0, children=[refs["c"]]
    )
    refs["a2"] = w.call(
        Subject("hello", PKG, "main", "a", "skill"),
        outcome="completed",
        started_at=T0,
        children=[refs["child"]],
    )
    refs["a"] = w.step(
        Subject("hello", PKG, "main", "a"),
        outcome="completed",
        started_at=T0,
        children=[refs["a1"], refs["a2"]],
    )
    refs["b1"] = w.call(
        Subject("hello", PKG, "main", "b", "fs.write"),
        outcome="failed",
        seal_reason="policy_refused",
        started_at=T0,
    )
    refs["b"] = w.step(
        Subject("hello", PKG, "main", "b"),
        outcome="failed",
        seal_reason="child_failed",
        started_at=T0,
        children=[refs["b1"]],
    )
    refs["root"] = w.run(
        sub,
        outcome="failed",
        seal_reason="child_failed",
        started_at=T0,
        children=[refs["a"], refs["b"]],
    )
    return refs

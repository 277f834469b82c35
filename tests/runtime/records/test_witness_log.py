"""The witness's log: claims checked strictly (fuzzed), entries countersigned and chained."""

from __future__ import annotations

import base64
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.errors import ConfigError
from proctor.receipts.signing import signer_from_seed
from proctor.runtime.records.witness import claim_of, entry_body
from proctor.runtime.records.witness_server import WitnessLog

SIGNER = signer_from_seed(b"\x05" * 32)
HEAD = {"lines": 4, "last_digest": "sha256:" + "a" * 64}


def test_a_claim_is_appended_countersigned_and_chained(tmp_path: Path) -> None:
    log = WitnessLog(tmp_path)
    first = log.append(claim_of(SIGNER, "sha256:ws", "r1", "sha256:" + "b" * 64, HEAD))
    second = log.append(claim_of(SIGNER, "sha256:ws", "r2", "sha256:" + "c" * 64, HEAD))
    assert (first["seq"], second["seq"]) == (1, 2)
    key = log.signer.public_key
    assert key.verify(base64.b64decode(second["signature"]), entry_body(second))
    again = WitnessLog(tmp_path)  # the chain goes on after a restart
    third = again.append(claim_of(SIGNER, "sha256:ws", "r3", "sha256:" + "d" * 64, HEAD))
    assert third["seq"] == 3 and third["prev"] != second["prev"]
    assert [e["seq"] for e in again.entries("sha256:ws")] == [1, 2, 3]
    assert again.entries("sha256:other") == []


def test_a_claim_signed_by_another_key_is_refused(tmp_path: Path) -> None:
    doc = claim_of(SIGNER, "sha256:ws", "r1", "sha256:" + "b" * 64, HEAD)
    doc["claim"]["run_id"] = "r2"  # changed after signing
    with pytest.raises(ValueError):
        WitnessLog(tmp_path).append(doc)
    assert not (tmp_path / "entries.jsonl").exists()


_json: Any = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_any_other_document_is_refused(doc: Any) -> None:
    with tempfile.TemporaryDirectory() as folder:
        log = WitnessLog(Path(folder))
        with pytest.raises((ValueError, ConfigError, KeyError, TypeError)):
            log.append(json.loads(json.dumps(doc)))
        assert log.entries("") == []

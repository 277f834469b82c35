"""The lock of pinned definitions: written sorted with each digest, read back only when every
digest still matches its definition, pinned once unless replaced on purpose."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proctor.errors import ConfigError, RefusedCall
from proctor.runtime.gateway.pins import LOCK_FILE, Pins, definition_digest, diff_lines
from proctor.runtime.gateway.rate import RateWindows

DEFINITION = {"name": "lookup", "description": "Look up a key.", "inputSchema": {"type": "object"}}


def test_a_pin_is_written_once_and_replaced_only_on_purpose(tmp_path: Path) -> None:
    pins = Pins(tmp_path)
    assert pins.pin("kv", {"lookup": DEFINITION}) == ["lookup"]
    changed = {**DEFINITION, "description": "Something else."}
    assert pins.pin("kv", {"lookup": changed}) == []
    assert pins.pinned("kv", "lookup") == DEFINITION
    assert pins.pin("kv", {"lookup": changed}, replace=True) == ["lookup"]
    assert pins.pinned("kv", "lookup") == changed
    doc = json.loads((tmp_path / LOCK_FILE).read_text())
    assert doc["servers"]["kv"]["lookup"]["digest"] == definition_digest(changed)


def test_a_lock_edited_by_hand_is_refused(tmp_path: Path) -> None:
    Pins(tmp_path).pin("kv", {"lookup": DEFINITION})
    path = tmp_path / LOCK_FILE
    doc = json.loads(path.read_text())
    doc["servers"]["kv"]["lookup"]["definition"]["description"] = "Quietly changed."
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as refused:
        Pins(tmp_path).read()
    assert refused.value.code == "mcp_lock_invalid"
    path.write_text("not json")
    with pytest.raises(ConfigError):
        Pins(tmp_path).read()


def test_the_diff_shows_both_sides() -> None:
    lines = diff_lines(DEFINITION, {**DEFINITION, "description": "New."})
    assert '-  "description": "Look up a key.",' in lines
    assert '+  "description": "New.",' in lines


def test_a_window_counts_calls_and_refuses_past_its_limit(tmp_path: Path) -> None:
    now = [1000.0]
    windows = RateWindows(tmp_path, clock=lambda: now[0])
    limits = [("mcp:kv", 2, 60)]
    windows.take(limits)
    windows.take(limits)
    with pytest.raises(RefusedCall) as refused:
        windows.take(limits)
    assert refused.value.code == "rate_limited"
    assert refused.value.details["retry_after_seconds"] == 60
    now[0] += 60  # the window slid past the first two calls
    windows.take(limits)

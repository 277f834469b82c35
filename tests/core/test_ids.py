"""Run and event ids are version 4 UUIDs, as ``uuid.uuid4()`` makes them; audit event ids are
counted under a prefix drawn once per process (and again in a forked child)."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import uuid
from typing import Any

import pytest

from proctor.core.ids import counted_uuid4_text, uuid4_hex, uuid4_text


def test_ids_are_random_version_4_uuids() -> None:
    seen = set()
    for _ in range(2000):
        text = uuid4_text()
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == text
        h = uuid4_hex()
        assert re.fullmatch(r"[0-9a-f]{32}", h) and uuid.UUID(hex=h).hex == h
        assert uuid.UUID(hex=h).version == 4
        seen.update((text, h))
    assert len(seen) == 4000


def test_counted_ids_are_version_4_uuids_that_read_no_random_bytes(monkeypatch: Any) -> None:
    # the audit log's event ids: drawn once per process, then counted (no getrandom per line)
    counted_uuid4_text()

    def refused(n: int) -> bytes:
        raise AssertionError("a counted id read random bytes")

    monkeypatch.setattr(os, "urandom", refused)
    texts = [counted_uuid4_text() for _ in range(2000)]
    for text in texts:
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == text
    assert len(set(texts)) == len(texts)
    assert len({text[:24] for text in texts}) == 1  # one process's prefix, counted on


def test_counted_ids_wrap_within_their_twelve_digits(monkeypatch: Any) -> None:
    from proctor.core import ids

    monkeypatch.setattr(ids, "_counted", ("01234567-89ab-4def-8123-", itertools.count(2**48 - 1)))
    assert counted_uuid4_text() == "01234567-89ab-4def-8123-ffffffffffff"
    assert counted_uuid4_text() == "01234567-89ab-4def-8123-000000000000"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_a_forked_child_counts_under_a_prefix_of_its_own() -> None:
    parent = [counted_uuid4_text() for _ in range(3)]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its ids, then out at once
        try:
            os.write(write, ",".join(counted_uuid4_text() for _ in range(3)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as handle:
        child = handle.read().split(",")
    os.waitpid(pid, 0)
    assert len(child) == 3
    assert {text[:24] for text in child}.isdisjoint({text[:24] for text in parent})
    after = counted_uuid4_text()  # the parent counts on under its own prefix
    assert after[:24] == parent[0][:24] and after not in child


def test_processes_draw_their_own_prefixes() -> None:
    script = (
        "from proctor.core.ids import counted_uuid4_text as c\n"
        "print(','.join(c() for _ in range(200)))"
    )
    outputs = [
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
        for _ in range(4)
    ]
    batches = [out.stdout.strip().split(",") for out in outputs]
    every = [text for batch in batches for text in batch]
    assert len(set(every)) == len(every) == 800
    assert len({batch[0][:24] for batch in batches}) == 4

"""Run and event ids are version 4 UUIDs, as ``uuid.uuid4()`` makes them."""

from __future__ import annotations

import re
import uuid

from proctor.core.ids import uuid4_hex, uuid4_text


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

"""``Places`` (the pack window's table of where a pack's receipts lie) answers exactly what a
dict of lowercase hex digests to places, filled first copy kept, answers: for digests noted
once or many times, digests sharing their first 8 bytes, and any other string asked."""

from __future__ import annotations

import hashlib
from array import array

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.runtime.records.pack_places import Places

# few distinct bytes, so that digests often share their first 8 bytes or are equal
_DIGESTS = st.lists(
    st.builds(
        lambda head, tail: head + tail,
        st.binary(min_size=8, max_size=8).map(lambda b: bytes(x % 3 for x in b)),
        st.sampled_from([bytes(24), b"\x01" * 24, hashlib.sha256(b"x").digest()[:24]]),
    )
    | st.binary(min_size=32, max_size=32),
    max_size=40,
)
_PLACES = st.integers(min_value=0, max_value=(1 << 64) - 1)


@given(_DIGESTS, st.data())
def test_places_answer_as_a_dict_of_hex_first_copy_kept(
    digests: list[bytes], data: st.DataObject
) -> None:
    places = data.draw(st.lists(_PLACES, min_size=len(digests), max_size=len(digests)))
    plain: dict[str, int] = {}
    for digest, place in zip(digests, places, strict=True):
        plain.setdefault(digest.hex(), place)
    table = Places(bytearray(b"".join(digests)), array("Q", places))
    assert len(table) == len(digests)
    for digest in digests:
        name = digest.hex()
        assert table.get(name) == plain[name]
        # the same digest named otherwise names nothing
        for other in (name.upper(), " " + name[:-1], "+" + name[1:], name[:16] + "_" + name[17:]):
            if other != name:
                assert table.get(other) is None
        assert table.get(name[:-1]) is None
        assert table.get(name + "0") is None
    asked = data.draw(st.text(max_size=70) | _DIGESTS.map(lambda d: d[0].hex() if d else ""))
    assert table.get(asked) == plain.get(asked)


def test_an_empty_table_finds_nothing() -> None:
    table = Places()
    assert len(table) == 0
    assert table.get("0" * 64) is None
    assert table.get("") is None


def test_digests_must_be_32_bytes_for_each_place() -> None:
    with pytest.raises(ValueError, match="32-byte digest"):
        Places(bytearray(31), array("Q", [1]))
    with pytest.raises(ValueError, match="32-byte digest"):
        Places(bytearray(32), array("Q"))

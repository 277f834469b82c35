"""A receipt store's shelf learns a batch's places at once (``learn_many``) and ends exactly as
learning each in turn (``learn``) leaves it: the same places in the same order, the same packs
to read again, whether the batch fits under the shelf's bound, crosses it (once or many times)
or meets places it already holds, and from a shelf a read filled past its bound."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proctor.runtime.records import receipt_packs
from proctor.runtime.records.receipt_packs import PackShelf

_BOUND = 8


def _state(shelf: PackShelf) -> tuple[object, ...]:
    return list(shelf._known.items()), set(shelf._scanned), shelf._all_scanned


def _shelf(tmp: str, before: list[int], scanned: bool, overfull: int) -> PackShelf:
    shelf = PackShelf(tmp)
    for n in before:
        shelf.learn(f"{n:064x}", "a" * 32, n, 1)
    for n in range(overfull):  # as a read of a pack does: places past the bound
        shelf._known.setdefault(f"{1000 + n:064x}", ("c" * 32, n, 1))
    if scanned:
        shelf._scanned.add("c" * 32)
        shelf._all_scanned = True
    return shelf


@given(
    before=st.lists(st.integers(0, 30), max_size=12, unique=True),
    batch=st.lists(st.integers(0, 60), max_size=30, unique=True),
    scanned=st.booleans(),
    overfull=st.sampled_from([0, 0, 0, 3, 12]),
)
def test_learning_a_batch_at_once_ends_as_learning_each_in_turn(
    before: list[int], batch: list[int], scanned: bool, overfull: int
) -> None:
    hex_ids = [f"{n:064x}" for n in batch]
    ats = [10 * n for n in batch]
    sizes = [n + 1 for n in batch]
    bound = receipt_packs._KNOWN_MAX
    receipt_packs._KNOWN_MAX = _BOUND  # a small bound, so that batches cross it
    try:
        one_by_one = _shelf("unused", before, scanned, overfull)
        for hex_id, at, size in zip(hex_ids, ats, sizes, strict=True):
            one_by_one.learn(hex_id, "b" * 32, at, size)
        at_once = _shelf("unused", before, scanned, overfull)
        at_once.learn_many("b" * 32, hex_ids, ats, sizes)
    finally:
        receipt_packs._KNOWN_MAX = bound
    assert _state(at_once) == _state(one_by_one)

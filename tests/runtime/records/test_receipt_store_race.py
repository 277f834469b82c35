"""Writers that make a new receipt store at the same moment (a run's concurrent children,
each sealing first in a fresh workspace): none of them takes the folder another is making
for something that is not a store. The check looks once at what stands at the path (a folder
made between two looks used to be refused ``it is not a folder``)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from proctor.errors import ReceiptInvalid
from proctor.runtime.records.receipts import INDEX_NAME, ReceiptStore

KEY_ID = "sha256:" + "ab" * 32
WRITERS = 6


def _race(folder: Path) -> tuple[list[ReceiptInvalid], list[str]]:
    """``WRITERS`` threads at once on a store not made yet: looks, key notes and writes,
    some sharing one store object, some with their own. Their refusals, and the receipts
    written."""
    shared = ReceiptStore(folder, durable=False)
    start = threading.Barrier(WRITERS)
    refused: list[ReceiptInvalid] = []
    written: list[str] = []

    def work(n: int) -> None:
        store = shared if n % 2 else ReceiptStore(folder, durable=False)
        receipt_id = "sha256:" + os.urandom(32).hex()
        start.wait()
        try:
            if n % 3 == 0:
                store.check()
            elif n % 3 == 1:
                store.note_key(KEY_ID, source="home")
            else:
                store.put(receipt_id, b'{"n":%d}\n' % n, kind="run", outcome="completed")
                written.append(receipt_id)
        except ReceiptInvalid as exc:
            refused.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return refused, written


def test_writers_making_one_store_at_once_never_take_it_for_a_foreign_folder(
    tmp_path: Path,
) -> None:
    for trial in range(80):
        folder = tmp_path / f"ws{trial}" / ".proctor" / "receipts"
        refused, written = _race(folder)
        assert refused == [], [e.message for e in refused]
        reader = ReceiptStore(folder)
        assert all(reader.get(r) is not None for r in written)
        assert (folder / INDEX_NAME).read_bytes().startswith(b'{"schema"')
        assert reader.key_ids() == frozenset({KEY_ID})


def test_a_file_where_the_store_would_be_is_still_refused(tmp_path: Path) -> None:
    folder = tmp_path / "receipts"
    folder.write_text("not a folder")
    with pytest.raises(ReceiptInvalid, match="it is not a folder") as info:
        ReceiptStore(folder).put("sha256:" + "cd" * 32, b"x\n", kind="run", outcome="completed")
    assert info.value.code == "receipt_store_foreign"
    assert folder.read_text() == "not a folder"

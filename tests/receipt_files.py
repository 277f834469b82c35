"""What a receipt folder holds, read and changed as an attacker with write access would: the
receipts of its packs and loose files, one rewritten in place (its pack and index kept
consistent, the strongest tampering), or the folder turned into loose files (an earlier
version's layout)."""

from __future__ import annotations

import json
from pathlib import Path

from proctor.runtime.records.receipt_packs import pack_names, records_of
from proctor.runtime.records.receipts import INDEX_NAME, ReceiptStore


def stored(folder: Path) -> dict[str, bytes]:
    """Every receipt in ``folder`` by id (``sha256:<hex>``): loose files, then packs (first
    copy kept)."""
    found: dict[str, bytes] = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json")):
        if len(path.stem) == 64:
            found["sha256:" + path.stem] = path.read_bytes()
    for pack in pack_names(folder):
        data = (folder / "packs" / f"{pack}.pack").read_bytes()
        for hex_id, at, size in records_of(data):
            found.setdefault("sha256:" + hex_id, data[at : at + size])
    return found


def all_bytes(folder: Path) -> bytes:
    """Every byte of every file under ``folder`` (receipts, packs, index): to look for a value
    that must be in none of them."""
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def _entries(folder: Path) -> list[dict[str, object]]:
    lines = (folder / INDEX_NAME).read_bytes().splitlines()[1:]
    return [json.loads(line) for line in lines if line.strip()]


def _write_index(folder: Path, entries: list[dict[str, object]]) -> None:
    head = (folder / INDEX_NAME).read_bytes().splitlines()[0]
    body = b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in entries)
    (folder / INDEX_NAME).write_bytes(head + b"\n" + body)


def rewrite(folder: Path, receipt_id: str, data: bytes | None) -> None:
    """Put ``data`` where receipt ``receipt_id`` is (``None``: remove it): a loose file is
    rewritten or removed; in a pack the record is replaced and the pack's index entries moved
    to match, the pack keeping its name."""
    loose = folder / f"{receipt_id.removeprefix('sha256:')}.json"
    if loose.exists():
        if data is None:
            loose.unlink()
        else:
            loose.write_bytes(data)
        return
    entries = _entries(folder)
    pack = next(str(e["pack"]) for e in entries if e["receipt_id"] == receipt_id)
    path = folder / "packs" / f"{pack}.pack"
    old = path.read_bytes()
    mine = [e for e in entries if e.get("pack") == pack]
    mine.sort(key=lambda e: int(str(e["at"])))
    out = bytearray(old[: old.index(b"\n") + 1])  # the pack's own header
    kept: list[dict[str, object]] = []
    for entry in mine:
        at, size = int(str(entry["at"])), int(str(entry["size"]))
        record = old[at : at + size]
        if entry["receipt_id"] == receipt_id:
            if data is None:
                continue
            record = data
        kept.append({**entry, "at": len(out), "size": len(record)})
        out += record
    path.write_bytes(bytes(out))
    moved = {str(e["receipt_id"]): e for e in kept}
    rest = [moved.get(str(e["receipt_id"]), e) for e in entries if e.get("pack") != pack or
            str(e["receipt_id"]) in moved]  # fmt: skip
    _write_index(folder, rest)


def unpack(folder: Path) -> None:
    """Turn a store's packs into one ``<hex>.json`` file per receipt, as earlier versions wrote
    them: the packs are removed and the index lines lose their pack fields."""
    store = ReceiptStore(folder)
    for entry in _entries(folder):
        data = store.get(str(entry["receipt_id"]))
        assert data is not None
        (folder / f"{str(entry['receipt_id']).removeprefix('sha256:')}.json").write_bytes(data)
    for pack in (folder / "packs").glob("*.pack"):
        pack.unlink()
    (folder / "packs").rmdir()
    entries = [
        {k: v for k, v in e.items() if k not in ("pack", "at", "size")} for e in _entries(folder)
    ]
    _write_index(folder, entries)

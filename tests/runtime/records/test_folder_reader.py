"""The verifier's folder reader: whole files, whatever their size; absent means None."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.errors import StoreError
from proctor.runtime.records.folder_reader import FolderReader

RID = "sha256:" + "ab" * 32


def test_reads_a_file_larger_than_one_read(tmp_path: Path) -> None:
    data = b"x" * (200 * 1024 + 3)
    (tmp_path / f"{'ab' * 32}.json").write_bytes(data)
    reader = FolderReader(tmp_path)
    try:
        assert reader(RID) == data
        assert reader("ab" * 32) == data
        (tmp_path / f"{'ab' * 32}.json").write_bytes(b"")
        assert reader(RID) == b""
    finally:
        reader.close()
    (tmp_path / f"{'ab' * 32}.json").write_bytes(b"small")
    assert reader(RID) == b"small"  # after close: by full path


def test_absent_files_and_names_that_are_not_ids_read_as_none(tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_bytes(b"{}")
    reader = FolderReader(tmp_path)
    assert reader(RID) is None
    assert reader("../notes") is None and reader("sha256:" + "AB" * 32) is None
    reader.close()
    missing = FolderReader(tmp_path / "nowhere")
    assert missing(RID) is None


def test_a_folder_that_is_a_file_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "plain").write_bytes(b"")
    reader = FolderReader(tmp_path / "plain")
    with pytest.raises(StoreError) as info:
        reader(RID)
    assert info.value.code == "receipt_store_io"

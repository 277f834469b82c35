"""The verifier's folder reader: whole files, whatever their size; absent means None."""

from __future__ import annotations

import os
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


def test_a_file_with_bytes_after_its_line_feed_reads_whole(tmp_path: Path) -> None:
    reader = FolderReader(tmp_path)
    for data in (b'{"a":1}\n', b'{"a":1}\nafter', b'{"a":1}\nafter\n', b"\n" * 70_000):
        (tmp_path / f"{'ab' * 32}.json").write_bytes(data)
        assert reader(RID) == data
    reader.close()


@pytest.mark.skipif(not hasattr(os, "O_NOATIME"), reason="O_NOATIME is Linux's")
def test_reading_a_receipt_leaves_its_access_time(tmp_path: Path) -> None:
    path = tmp_path / f"{'ab' * 32}.json"
    path.write_bytes(b"{}\n")
    stat = path.stat()
    # an access time before the change time: relatime would update it on the next read
    os.utime(path, ns=(stat.st_mtime_ns - 10**12, stat.st_mtime_ns))
    reader = FolderReader(tmp_path)
    assert reader(RID) == b"{}\n"
    reader.close()
    assert path.stat().st_atime_ns == stat.st_mtime_ns - 10**12


@pytest.mark.parametrize(
    "receipt_id",
    [
        "../" + "ab" * 32,
        "sha256:../" + "ab" * 31,
        "sha256:" + "ab" * 31 + "/x",
        "sha256:" + "ab" * 32 + "\n",
        "sha256:" + "ab" * 32 + "\x00",
        "sha256:" + "ab" * 31 + "a",
        "sha256:" + "ab" * 32 + "a",
        "sha256:" + "ab" * 31 + "aG",
        "sha256:" + "ab" * 31 + "a\u0660",  # an Arabic-Indic digit: a digit, not hex
        "SHA256:" + "ab" * 32,
        "sha256:sha256:" + "ab" * 32,
        " sha256:" + "ab" * 32,
        "",
    ],
)
def test_only_ids_that_are_sha256_and_64_lowercase_hex_are_read(
    tmp_path: Path, receipt_id: str
) -> None:
    """The reader's boundary: a name it opens is exactly 64 lowercase hex digits and .json,
    whatever the id held; anything else reads as absent, even where such a file exists."""
    (tmp_path / f"{'ab' * 32}.json").write_bytes(b"{}\n")
    (tmp_path / "x").write_bytes(b"{}\n")
    reader = FolderReader(tmp_path)
    try:
        assert reader(receipt_id) is None
        assert reader("sha256:" + "ab" * 32) == reader("ab" * 32) == b"{}\n"
    finally:
        reader.close()


@pytest.mark.parametrize("size", [(1 << 16) - 1, 1 << 16, (1 << 16) + 1, 3 << 16, (1 << 21) + 5])
def test_files_around_and_past_one_read_read_whole(tmp_path: Path, size: int) -> None:
    """A file of one read or more is read again whole from its start: nothing is lost or read
    twice, whether it ends with a line feed or not."""
    for end in (b"\n", b"x"):
        data = (bytes(range(256)) * (size // 256 + 1))[: size - 1] + end
        assert len(data) == size
        (tmp_path / f"{'ab' * 32}.json").write_bytes(data)
        reader = FolderReader(tmp_path)
        try:
            assert reader(RID) == data
        finally:
            reader.close()

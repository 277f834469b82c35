"""A package file unchanged since it was read is not read again; any change, or a change too
close to the read, reads it again (``proctor.runtime.skill_files``)."""

from __future__ import annotations

import os
from pathlib import Path

from proctor.receipts.canonical import digest
from proctor.runtime import skills
from proctor.runtime.skill_files import RACY_NS, SeenFiles


def _package(root: Path) -> Path:
    (root / "one").mkdir(parents=True)
    (root / "one" / "SKILL.md").write_text("---\nname: one\ndescription: One.\n---\n")
    (root / "one" / "run.yaml").write_text("minimum_proctor: 0.1.0\n")
    (root / "one" / "notes.txt").write_text("aaaa")
    return root / "one"


def test_an_entry_is_used_only_for_the_same_file_changed_well_before_its_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f"
    path.write_text("aaaa")
    st = os.lstat(path)
    changed = max(st.st_mtime_ns, st.st_ctime_ns)
    seen = SeenFiles()
    seen.put(str(path), st, changed + RACY_NS, "d", None)  # made exactly RACY_NS after: racy
    assert seen.get(str(path), st, text=False) is None
    seen.put(str(path), st, changed + RACY_NS + 1, "d", None)
    assert seen.get(str(path), os.lstat(path), text=False) == ("d", None)
    assert seen.get(str(path), os.lstat(path), text=True) is None  # no text was kept
    path.write_text("bbbb")  # the same size, changed since: another identity
    assert seen.get(str(path), os.lstat(path), text=False) is None
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # its old times put back: ctime differs
    assert seen.get(str(path), os.lstat(path), text=False) is None
    (tmp_path / "g").write_text("aaaa")
    os.replace(tmp_path / "g", path)  # replaced by a rename: another inode
    assert seen.get(str(path), os.lstat(path), text=False) is None


def test_a_package_read_takes_a_kept_digest_only_while_the_file_is_the_same(
    tmp_path: Path,
) -> None:
    folder = _package(tmp_path)
    notes = folder / "notes.txt"
    _files, first = skills.read_package(folder, "one")
    # a file changed just now is read again on every load (its entry is racy)
    notes.write_text("bbbb")
    files, second = skills.read_package(folder, "one")
    assert second != first and files["notes.txt"] == ""
    # an entry made well after the file's last change is used: a digest planted in it shows
    st = os.lstat(notes)
    planted = "sha256:" + "0" * 64
    skills._SEEN.put(str(notes), st, max(st.st_mtime_ns, st.st_ctime_ns) + RACY_NS + 1,
                     planted, None)  # fmt: skip
    _files, third = skills.read_package(folder, "one")
    assert third != second
    truth = {
        "SKILL.md": _sha(folder / "SKILL.md"),
        "run.yaml": _sha(folder / "run.yaml"),
        "notes.txt": planted,
    }
    assert third == digest(truth)
    notes.write_text("cccc")  # edited between two loads: read again
    _files, fourth = skills.read_package(folder, "one")
    assert fourth == digest({**truth, "notes.txt": _sha(notes)})


def test_a_kept_text_is_the_text_a_run_parses(tmp_path: Path) -> None:
    folder = _package(tmp_path)
    skill_md = folder / "SKILL.md"
    files, _digest = skills.read_package(folder, "one")
    st = os.lstat(skill_md)
    skills._SEEN.put(str(skill_md), st, max(st.st_mtime_ns, st.st_ctime_ns) + RACY_NS + 1,
                     _sha(skill_md), files["SKILL.md"])  # fmt: skip
    again, _digest = skills.read_package(folder, "one")
    assert again["SKILL.md"] == files["SKILL.md"] and again["SKILL.md"].startswith("---")
    skill_md.write_text("---\nname: one\ndescription: Two.\n---\n")
    edited, _digest = skills.read_package(folder, "one")
    assert "Two." in edited["SKILL.md"]


def _sha(path: Path) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()

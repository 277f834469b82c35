"""Locating and reading a skill package refuses what the file system refuses with a code
(a name too long to look up, a file that cannot be read), never an ``OSError`` traceback, and
a package past its 64 MiB cap is refused without reading past the cap."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.errors import UsageError
from proctor.runtime.skills import locate, read_package


def test_a_reference_too_long_for_the_file_system_is_not_found(tmp_path: Path) -> None:
    name = "a" * 300  # past NAME_MAX (255) on every Linux file system
    with pytest.raises(UsageError) as info:
        locate(name, cwd=tmp_path, workspace_root=tmp_path)
    assert info.value.code == "skill_not_found"
    assert "no skill package at" in info.value.message and len(info.value.message) < 300


def test_a_reference_to_the_root_is_labelled_by_its_path(tmp_path: Path) -> None:
    _folder, label, _method = locate("/", cwd=tmp_path, workspace_root=tmp_path)
    assert label == "/"


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc")
def test_a_package_file_that_cannot_be_read_is_named() -> None:
    # /proc/self/clear_refs is a regular file that only takes writes: reading it fails.
    with pytest.raises(UsageError) as info:
        read_package(Path("/proc/self"), "self")
    assert info.value.code == "package_unreadable"
    assert info.value.message.startswith("self/") and "could not be read" in info.value.message


def _package(root: Path) -> Path:
    root.mkdir()
    (root / "SKILL.md").write_text("---\nname: big\ndescription: Big.\n---\n", encoding="utf-8")
    return root


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as handle:
        handle.truncate(size)  # holes: no disk used, reads as zeros


_CAPPED_READ = (
    "import resource, sys\n"
    "from pathlib import Path\n"
    "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
    "from proctor.errors import UsageError\n"
    "from proctor.runtime.skills import read_package\n"
    "try:\n"
    "    read_package(Path(sys.argv[1]), 'big')\n"
    "except UsageError as exc:\n"
    "    print(exc.code)\n"
)


def test_a_file_past_the_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    # Read whole, an 8 GiB file cannot even be allocated in an address space of 1 GiB.
    package = _package(tmp_path / "big")
    _sparse(package / "blob.bin", 8 << 30)
    done = subprocess.run(
        [sys.executable, "-c", _CAPPED_READ, str(package)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stdout.strip() == "package_too_large"


def test_the_cap_counts_every_file_and_admits_exactly_64_mib(tmp_path: Path) -> None:
    package = _package(tmp_path / "big")
    skill_md = (package / "SKILL.md").stat().st_size
    _sparse(package / "a.bin", 40 << 20)
    _sparse(package / "b.bin", (64 << 20) - (40 << 20) - skill_md)
    files, _digest = read_package(package, "big")
    assert set(files) == {"SKILL.md", "a.bin", "b.bin"}
    _sparse(package / "c.bin", 1)
    with pytest.raises(UsageError) as info:
        read_package(package, "big")
    assert info.value.code == "package_too_large"


def test_a_file_is_read_whole_past_its_stated_size_and_never_past_the_cap() -> None:
    # a file that grew after its size was taken is read to its end; one past the cap stops one
    # byte past it (the caller refuses it); neither needs a buffer of the cap's size
    from proctor.runtime.skills import _read_to_cap

    assert _read_to_cap(io.BytesIO(b"x" * 10), 4, 100) == b"x" * 10
    assert _read_to_cap(io.BytesIO(b"x" * 10), 4, 6) == b"x" * 7
    assert _read_to_cap(io.BytesIO(b"x" * 10), 10, 10) == b"x" * 10
    assert _read_to_cap(io.BytesIO(b"x" * 3), 10, 100) == b"x" * 3  # shrank while it was read


def test_package_authority_files_name_the_packages_own_files_in_the_workspace(
    tmp_path: Path,
) -> None:
    from proctor.runtime.skills import load_skill, package_authority_files

    root = tmp_path / "ws"
    (root / "tools" / "one").mkdir(parents=True)
    (root / "tools" / "one" / "SKILL.md").write_text("---\nname: one\ndescription: d\n---\n")
    (root / "tools" / "one" / "run.yaml").write_text(
        "minimum_proctor: 0.1.0\nmethods:\n  main:\n    steps:\n"
        "      - {id: s, tool: echo, inputs: {text: x}}\n"
    )
    (root / "SKILL.md").write_text("---\nname: top\ndescription: d\n---\n")
    inner = load_skill("tools/one", cwd=root, workspace_root=root)
    assert package_authority_files(inner, root) == {"tools/one/SKILL.md", "tools/one/run.yaml"}
    top = load_skill(".", cwd=root, workspace_root=root)
    assert package_authority_files(top, root) == {"SKILL.md"}
    # a folder whose name only starts like the workspace's is outside it
    twin = tmp_path / "ws-twin"
    twin.mkdir()
    (twin / "SKILL.md").write_text("---\nname: twin\ndescription: d\n---\n")
    outside = load_skill(str(twin), cwd=root, workspace_root=root)
    assert package_authority_files(outside, root) == frozenset()
    assert outside.label == "ws-twin"


def _package(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: x\ndescription: x\n---\n")
    return folder


def test_a_plain_name_is_looked_for_where_paths_joined_by_path_would_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain name is joined by its text (no Path built): the current folder first, then the
    workspace's skills/; the current folder "/" or "." joins as Path joins it."""
    root = tmp_path / "ws"
    in_skills = _package(root / "skills" / "one")
    here = root / "sub"
    in_here = _package(here / "one")
    assert locate("one", cwd=here, workspace_root=root)[:2] == (in_here, "sub/one")
    assert locate("one#main", cwd=root, workspace_root=root) == (in_skills, "skills/one", "main")
    assert locate("one", cwd=Path("/"), workspace_root=root)[:2] == (in_skills, "skills/one")
    monkeypatch.chdir(here)
    assert locate("one", cwd=Path("."), workspace_root=root)[:2] == (in_here, "sub/one")
    # SKILL.md named in the current folder is its folder's package; another file is none
    assert locate("SKILL.md", cwd=in_here, workspace_root=root)[:2] == (in_here, "sub/one")
    (here / "notes.md").write_text("x")
    with pytest.raises(UsageError) as info:
        locate("notes.md", cwd=here, workspace_root=root)
    assert info.value.code == "not_a_package"
    # a linked package folder is its real folder
    (root / "skills" / "linked").symlink_to(in_here)
    assert locate("linked", cwd=root, workspace_root=root)[:2] == (in_here, "sub/one")
    with pytest.raises(UsageError) as info:
        locate("none", cwd=here, workspace_root=root)
    assert info.value.code == "skill_not_found"

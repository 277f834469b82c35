"""Every traversal payload of PayloadsAllTheThings is refused or stays inside the workspace.

Payloads: the four ``Directory Traversal/Intruder`` lists and the ``File Inclusion/Intruders``
lists (see the corpus's SOURCE.txt), with ``{FILE}`` filled by several targets and each line
URL-decoded zero, one and two times. The workspace sits 12 folders deep so ``..`` has room to
climb, holds a symlink to the host's ``/etc`` and a file named like the targets, and has the
same file planted outside; a resolved path outside the root would be a failure.
"""

from __future__ import annotations

import os
from collections import Counter
from urllib.parse import unquote

import pytest

from proctor.errors import RefusedCall
from proctor.runtime.boundary.workspace import Workspace
from tests.corpora import corpus_dir

TARGETS = ["etc/passwd", "README.md", ".env", "windows/win.ini", "..", ""]
LISTS = [
    "Directory Traversal/Intruder/directory_traversal.txt",
    "Directory Traversal/Intruder/deep_traversal.txt",
    "Directory Traversal/Intruder/traversals-8-deep-exotic-encoding.txt",
    "Directory Traversal/Intruder/dotdotpwn.txt",
    "File Inclusion/Intruders/Traversal.txt",
    "File Inclusion/Intruders/JHADDIX_LFI.txt",
    "File Inclusion/Intruders/List_Of_File_To_Include.txt",
    "File Inclusion/Intruders/dot-slash-PathTraversal_and_LFI_pairing.txt",
    "File Inclusion/Intruders/Linux-files.txt",
    "File Inclusion/Intruders/Windows-files.txt",
    "File Inclusion/Intruders/Mac-files.txt",
    "File Inclusion/Intruders/BSD-files.txt",
    "File Inclusion/Intruders/Web-files.txt",
    "File Inclusion/Intruders/simple-check.txt",
]


def payloads() -> list[str]:
    base = corpus_dir("payloadsallthethings")
    assert (base / "SOURCE.txt").is_file()
    out: set[str] = set()
    for name in LISTS:
        text = (base / name).read_text(encoding="utf-8", errors="surrogateescape")
        for line in text.splitlines():
            fills = [line.replace("{FILE}", t) for t in TARGETS] if "{FILE}" in line else [line]
            for filled in fills:
                once = unquote(filled, errors="surrogateescape")
                out.update({filled, once, unquote(once, errors="surrogateescape")})
    return sorted(out)


@pytest.fixture(scope="module")
def deep_workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    top = tmp_path_factory.mktemp("traversal")
    root = top.joinpath(*[f"d{i}" for i in range(12)], "ws")
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "passwd").write_text("inside\n")
    (root / "README.md").write_text("inside\n")
    (top / "etc").mkdir()
    (top / "etc" / "passwd").write_text("outside\n")
    os.symlink("/etc", root / "hostetc")
    os.symlink(top, root / "top")
    return Workspace(root)


def test_no_traversal_payload_escapes(deep_workspace: Workspace) -> None:
    ws = deep_workspace
    root = str(ws.root) + os.sep
    lines = payloads()
    assert len(lines) > 20_000
    codes: Counter[str] = Counter()
    inside = 0
    for line in lines:
        for access in ("read", "write"):
            try:
                got = ws.resolve(line, access)
            except RefusedCall as exc:
                codes[exc.code] += 1
                assert str(ws.root) not in exc.message
                continue
            real = os.path.realpath(got.abs)
            assert real == str(ws.root) or real.startswith(root), line
            assert ".." not in got.rel.split("/"), line
            inside += 1
    # The corpus exercises every kind of refusal, not only one.
    assert codes["path_outside_workspace"] > 1000
    assert codes["path_absolute"] > 100
    assert codes["path_empty"] + codes["path_nul"] + codes["sensitive_path"] > 0
    assert inside > 0


def test_symlinked_host_folders_are_refused(deep_workspace: Workspace) -> None:
    for path in ("hostetc/passwd", "top/etc/passwd", "hostetc/../etc/passwd"):
        with pytest.raises(RefusedCall) as info:
            deep_workspace.resolve(path, "read")
        assert info.value.code in {"path_outside_workspace", "sensitive_path"}, path
    assert deep_workspace.resolve("etc/passwd", "read").rel == "etc/passwd"

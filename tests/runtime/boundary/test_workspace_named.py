"""A read path resolved before: the workspace keeps the verdict on its string (its form, its
root, the name rules), never a fact about the disk. Every later read opens it again with no
symlink allowed and judges the file again, so a folder swapped for a symlink, a file swapped
for a link or given a private key, after the first read, is caught exactly as on the first."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.errors import RefusedCall
from proctor.runtime.boundary.fds import openat2_available
from proctor.runtime.boundary.workspace import Workspace

CANARY = "CANARY-0d4b6e"
PEM = (
    b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
    b"-----END OPENSSH PRIVATE KEY-----\n"
)

pytestmark = pytest.mark.skipif(
    not openat2_available(), reason="the kept verdicts serve the openat2 route only"
)


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    root = tmp_path / "ws"
    (root / "d").mkdir(parents=True)
    (root / "d" / "a.txt").write_text("inside\n")
    (root / ".proctor").mkdir()
    (root / ".proctor" / "a.txt").write_text(f"state {CANARY}\n")
    (root / ".env").write_text(f"TOKEN={CANARY}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "a.txt").write_text(f"outside {CANARY}\n")
    workspace = Workspace(root)
    # the first read: resolved by the one-lookup route, its verdict kept
    assert workspace.resolve_seen("d/a.txt", "read") == (
        workspace.resolve("d/a.txt", "read"),
        b"inside\n",
    )
    yield workspace


def refused(ws: Workspace, path: str) -> RefusedCall:
    with pytest.raises(RefusedCall) as info:
        ws.resolve_seen(path, "read")
    assert CANARY not in str(info.value.to_dict())
    return info.value


def swap_folder(ws: Workspace, target: Path | str) -> None:
    os.rename(ws.root / "d", ws.root / "d-moved")
    os.symlink(target, ws.root / "d")


def test_a_read_again_returns_the_file_as_it_is_now(ws: Workspace) -> None:
    (ws.root / "d" / "a.txt").write_text("changed\n")
    target, seen = ws.resolve_seen("d/a.txt", "read")
    assert (target.rel, seen) == ("d/a.txt", b"changed\n")


def test_a_folder_swapped_for_a_symlink_outside_is_refused(ws: Workspace) -> None:
    swap_folder(ws, ws.root.parent / "elsewhere")
    assert refused(ws, "d/a.txt").code == "path_outside_workspace"


def test_a_folder_swapped_for_a_symlink_to_proctor_state_is_refused(ws: Workspace) -> None:
    swap_folder(ws, ".proctor")
    err = refused(ws, "d/a.txt")
    assert err.code == "sensitive_path"


def test_a_folder_swapped_for_a_symlink_inside_leads_where_it_points(ws: Workspace) -> None:
    (ws.root / "other").mkdir()
    (ws.root / "other" / "a.txt").write_text("other\n")
    swap_folder(ws, "other")
    target, seen = ws.resolve_seen("d/a.txt", "read")
    assert (target.rel, seen) == ("other/a.txt", b"other\n")  # judged at its real path


def test_a_file_swapped_for_a_symlink_to_a_sensitive_file_is_refused(ws: Workspace) -> None:
    os.unlink(ws.root / "d" / "a.txt")
    os.symlink("../.env", ws.root / "d" / "a.txt")
    assert refused(ws, "d/a.txt").code == "sensitive_path"


def test_a_file_swapped_for_a_hard_link_is_refused(ws: Workspace) -> None:
    os.unlink(ws.root / "d" / "a.txt")
    os.link(ws.root.parent / "elsewhere" / "a.txt", ws.root / "d" / "a.txt")
    assert refused(ws, "d/a.txt").code == "hard_link"


def test_a_private_key_written_into_the_file_is_refused(ws: Workspace) -> None:
    (ws.root / "d" / "a.txt").write_bytes(PEM)
    assert refused(ws, "d/a.txt").code == "sensitive_path"


def test_a_removed_file_resolves_as_a_missing_one(ws: Workspace) -> None:
    os.unlink(ws.root / "d" / "a.txt")
    target, seen = ws.resolve_seen("d/a.txt", "read")
    assert (target.rel, seen) == ("d/a.txt", None)  # the tool reports not_found


def test_other_settings_judge_the_string_afresh(ws: Workspace) -> None:
    # a workspace whose settings put proctor's state in d/ refuses the path the first kept
    governed = ws.governing(extra_authority=frozenset(), environ={"PROCTOR_AUDIT_LOG": "d/a.txt"})
    assert refused(governed, "d/a.txt").code == "sensitive_path"
    ws.rules = governed.rules  # the same object under new rules: the kept verdict is not used
    assert refused(ws, "d/a.txt").code == "sensitive_path"

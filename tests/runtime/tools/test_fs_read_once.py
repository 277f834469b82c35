"""fs.read of a file containment read whole: the handler returns exactly the bytes containment
judged (one open, one read), and never anything a change after the check put there.

Containment opens every file a read names (no symlink on the way), checks its link count and
looks for a private key in its first ``HEAD_BYTES``; a file no larger than that has then been
read whole. The call's handler takes those bytes (once) instead of opening the file again. A
larger file, or one the handler reads a second time, is opened and judged again, as before.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ProctorError
from proctor.receipts.canonical import digest_bytes
from proctor.runtime.admission.governor import CallSpec, Governor
from proctor.runtime.boundary.opened import HEAD_BYTES, judge_open
from proctor.runtime.boundary.resolved import Resolved
from proctor.runtime.boundary.sanitize import Sanitizer
from proctor.runtime.boundary.views import admitted_workspace
from proctor.runtime.records.runs import RunRecord
from proctor.runtime.tools.base import ToolContext
from proctor.runtime.tools.fsutil import read_text_file
from proctor.runtime.tools.registry import native_tools
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_workspace,
    session,
)
from tests.runtime.tools.test_fs_support import Env
from tests.runtime.tools.test_fs_support import env as env  # fixture re-export

CANARY = "CANARY-5c1e07"
READ = native_tools()["fs.read"]


def governed_read(root: Path, args: dict[str, Any]) -> Any:
    """``fs.read`` through the whole admission path, as a run makes it."""
    s = session(root)
    s.store.create_run(RunRecord(run_id="r", skill="t", method="m"))
    policies, guards, _ = s.policy()
    governor = Governor(
        run_id="r", workspace=s.workspace, store=s.store, tools=s.tools, policies=policies,
        guards=guards, audit=s.audit, sanitizer=Sanitizer(),
    )  # fmt: skip
    return governor.call(CallSpec("fs.read", args, frozenset({"fs.read"}), step_id="s"))


def lines(size: int) -> bytes:
    """``size`` bytes of text in lines of 32 bytes (the last line possibly short)."""
    line = b"0123456789 abcdefghij klmnopqr.\n"
    return (line * (size // len(line) + 1))[:size]


@pytest.mark.parametrize(
    "size", [0, 1, 31, 4096, HEAD_BYTES - 1, HEAD_BYTES, HEAD_BYTES + 1, 3 * HEAD_BYTES + 7]
)
def test_a_governed_read_returns_every_byte_and_the_digest_at_any_size(
    tmp_path: Path, size: int
) -> None:
    root = make_workspace(tmp_path / "ws")
    data = lines(size)
    (root / "f.txt").write_bytes(data)
    outcome = governed_read(root, {"path": "f.txt"})
    assert outcome.ok, outcome.error
    assert outcome.result["content"] == data.decode()
    assert outcome.result["content_digest"] == digest_bytes(data)
    assert (outcome.result["size"], outcome.result["truncated"]) == (size, False)


@pytest.mark.parametrize("size", [100, HEAD_BYTES + 100])
def test_a_governed_capped_read_ends_on_a_line_and_digests_the_whole_file(
    tmp_path: Path, size: int
) -> None:
    root = make_workspace(tmp_path / "ws")
    data = lines(size)
    (root / "f.txt").write_bytes(data)
    outcome = governed_read(root, {"path": "f.txt", "max_bytes": 70})
    assert outcome.ok, outcome.error
    assert outcome.result["content"] == data[:64].decode()  # two whole lines of 32
    assert outcome.result["content_digest"] == digest_bytes(data)
    assert (outcome.result["size"], outcome.result["truncated"]) == (size, True)


def test_a_governed_read_of_a_small_binary_file_is_refused(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    (root / "b.bin").write_bytes(b"text\x00more")
    outcome = governed_read(root, {"path": "b.bin"})
    assert outcome.status == "failed" and outcome.error["code"] == "binary_file"


def test_a_small_private_key_is_refused_before_any_handler_runs(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    key = (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----\n"
    )
    (root / "notes.txt").write_text(key)
    outcome = governed_read(root, {"path": "notes.txt"})
    assert outcome.status == "refused" and outcome.error["code"] == "sensitive_path"
    assert "b3BlbnNzaC1rZXk" not in str(outcome.error)


def admitted(env: Env, path: str) -> tuple[ToolContext, Resolved, bytes | None]:
    """The handler's context as admission builds it for ``fs.read`` of ``path``, with the bytes
    containment read (``None`` when it did not read the file whole)."""
    target, seen = env.ws.resolve_seen(path, "read")
    view = admitted_workspace(
        env.ws, {(path, "read"): target}, {target: seen} if seen is not None else {}
    )
    ctx = ToolContext(workspace=view, store=env.store, run_id="run-test", call_id="c-late")
    return ctx, target, seen


def test_containment_reads_a_small_file_whole_and_a_large_one_not(env: Env) -> None:
    env.write("small.txt", "small\n")
    env.write("large.txt", lines(HEAD_BYTES + 1))
    assert env.ws.resolve_seen("small.txt", "read")[1] == b"small\n"
    assert env.ws.resolve_seen("large.txt", "read")[1] is None
    (env.root / "folder").mkdir()
    assert env.ws.resolve_seen("folder", "read")[1] is None
    assert env.ws.resolve_seen("missing.txt", "read")[1] is None


def test_the_handler_returns_the_judged_bytes_not_a_file_swapped_in_after(env: Env) -> None:
    env.write("a.txt", "judged\n")
    ctx, _target, seen = admitted(env, "a.txt")
    assert seen == b"judged\n"
    outside = env.root.parent / "outside.txt"
    outside.write_text(f"outside {CANARY}\n")
    os.unlink(env.root / "a.txt")
    os.link(outside, env.root / "a.txt")  # a second name for a file outside
    result = READ.handler(ctx, {"path": "a.txt"})
    assert result["content"] == "judged\n" and result["content_digest"] == digest_bytes(seen)
    assert CANARY not in str(result)


def test_a_large_file_is_judged_again_at_open_when_it_became_a_hard_link(env: Env) -> None:
    env.write("a.txt", lines(HEAD_BYTES + 1))
    ctx, _target, seen = admitted(env, "a.txt")
    assert seen is None
    outside = env.root.parent / "outside.txt"
    outside.write_text(f"outside {CANARY}\n")
    os.unlink(env.root / "a.txt")
    os.link(outside, env.root / "a.txt")
    with pytest.raises(ProctorError) as info:
        READ.handler(ctx, {"path": "a.txt"})
    assert info.value.code == "hard_link"


def test_a_folder_swapped_for_a_symlink_after_the_check_leads_nowhere(env: Env) -> None:
    env.write("d/a.txt", "judged\n")
    env.write("d/big.txt", lines(HEAD_BYTES + 1))
    outside = env.root.parent / "elsewhere"
    outside.mkdir()
    (outside / "a.txt").write_text(f"outside {CANARY}\n")
    (outside / "big.txt").write_text(f"outside {CANARY}\n")
    small_ctx, _t, seen = admitted(env, "d/a.txt")
    big_ctx, _t, big_seen = admitted(env, "d/big.txt")
    assert seen == b"judged\n" and big_seen is None
    os.rename(env.root / "d", env.root / "d-moved")
    os.symlink(outside, env.root / "d")
    assert READ.handler(small_ctx, {"path": "d/a.txt"})["content"] == "judged\n"
    with pytest.raises(ProctorError) as info:
        READ.handler(big_ctx, {"path": "d/big.txt"})
    assert info.value.code == "path_changed"


def test_the_judged_bytes_are_handed_over_once(env: Env) -> None:
    env.write("a.txt", "first\n")
    ctx, target, _seen = admitted(env, "a.txt")
    assert read_text_file(ctx.workspace, target, 1024)[0] == "first\n"
    env.write("a.txt", "second\n")
    assert read_text_file(ctx.workspace, target, 1024)[0] == "second\n"  # read anew
    assert ctx.workspace.take_seen(target) is None


def test_a_file_that_does_not_know_its_size_is_not_taken_as_read_whole() -> None:
    # /proc files say size 0 and hold bytes: a head read short of HEAD_BYTES with more bytes
    # than fstat said is not a whole file
    fd = os.open("/proc/self/status", os.O_RDONLY)
    assert judge_open("status", fd) is None
    with pytest.raises(OSError):
        os.fstat(fd)  # closed by judge_open


def test_an_empty_file_is_read_whole(env: Env) -> None:
    env.write("empty.txt", b"")
    fd = os.open(env.root / "empty.txt", os.O_RDONLY)
    assert judge_open("empty.txt", fd) == b""

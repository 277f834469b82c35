"""A session looks bubblewrap up along ``PATH`` once, then only looks at the file it found: a
file gone or replaced is looked up again; none found is never kept."""

from __future__ import annotations

import os
from pathlib import Path

from proctor.runtime.boundary.sandbox_setting import FoundExecutables, sandbox_setting


def _tool(path: Path, text: str = "#!/bin/sh\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def _bwrap(environ: dict[str, str], found: FoundExecutables) -> str | None:
    return sandbox_setting(environ, default="auto", found=found).bwrap


def test_the_found_bubblewrap_is_kept_while_its_file_stays_the_same(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    environ = {"PATH": f"{first}{os.pathsep}{second}"}
    found: FoundExecutables = {}
    assert _bwrap(environ, found) is None and not found  # none found: never kept
    tool = _tool(second / "bwrap")
    assert _bwrap(environ, found) == str(tool)
    _tool(first / "bwrap")  # put earlier on PATH: this session keeps the one it found
    assert _bwrap(environ, found) == str(tool)
    assert _bwrap(environ, {}) == str(first / "bwrap")  # the next session finds it
    (first / "bwrap").unlink()
    tool.unlink()  # gone: looked up again
    assert _bwrap(environ, found) is None and not found
    _tool(second / "bwrap")
    assert _bwrap(environ, found) == str(tool)
    replaced = _tool(tmp_path / "new-bwrap", "#!/bin/sh\nexit 0\n")
    replaced.replace(tool)  # another file at the same path: looked up again, and kept anew
    assert _bwrap(environ, found) == str(tool)
    assert found[next(iter(found))][1][1] == os.stat(tool).st_ino


def test_another_path_is_looked_up_on_its_own(tmp_path: Path) -> None:
    one = _tool(tmp_path / "one" / "bwrap")
    two = _tool(tmp_path / "two" / "bwrap")
    found: FoundExecutables = {}
    assert _bwrap({"PATH": str(one.parent)}, found) == str(one)
    assert _bwrap({"PATH": str(two.parent)}, found) == str(two)
    assert _bwrap({"PATH": str(one.parent), "PROCTOR_BWRAP": "/x/bwrap"}, found) == "/x/bwrap"

"""Every ``proctor`` command in a ``sh`` block of the README and docs/ runs as written.

The rule the docs follow (docs/testing.md): a fenced ``sh`` block holds commands a reader can
paste into a clone of the repository; a synopsis with placeholders is a ``text`` block. Each
line of a ``sh`` block runs with bash, in order, in a scratch workspace holding a copy of
``examples/`` (one workspace per page, so a page's commands build on each other), with a home
of its own. Lines that neither run ``proctor`` nor write a file it reads (``echo``,
``printf``) are left out (the test suite's own command, pip). A line exits 0 unless its
comment says ``# exit N: ...``; a line whose comment says ``# needs: ...`` (a model
provider, a terminal) is not run. The README's install prefix (``python3 -m venv .venv &&
.venv/bin/pip install ... &&``) is the install itself, not run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_INSTALL = re.compile(r"^python3 -m venv \.venv && \.venv/bin/pip install [^&]+&& ")
_EXIT = re.compile(r"#\s*exit (\d+)\b")
_PROCTOR = re.compile(r"(?:^|[|&;]\s*)proctor ")


def commands(page: Path) -> list[tuple[int, str, int]]:
    """(line number, command, expected exit code) of each runnable line of ``page``."""
    text = page.read_text(encoding="utf-8")
    out: list[tuple[int, str, int]] = []
    for block in _BLOCK.finditer(text):
        if block.group(1) != "sh":
            continue
        first = text[: block.start(2)].count("\n") + 1
        pending = ""
        for offset, raw in enumerate(block.group(2).splitlines()):
            pending += raw
            if raw.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            line, pending = pending.strip(), ""
            if not line or line.startswith("#") or "# needs:" in line:
                continue
            line = _INSTALL.sub("", line).replace(".venv/bin/proctor", "proctor")
            if not _PROCTOR.search(line) and not line.startswith(("echo ", "printf ")):
                continue  # not a proctor command nor a file it reads (the test suite, pip)
            expected = _EXIT.search(line)
            out.append((first + offset, line, int(expected.group(1)) if expected else 0))
    return out


RUNNABLE = [(page, c) for page in PAGES for c in commands(page)]


def test_the_docs_have_runnable_proctor_commands() -> None:
    pages = {page.name for page, (_, line, _) in RUNNABLE if "proctor " in line}
    assert {"README.md", "agents.md", "approvals.md", "credentials.md"} <= pages


@pytest.mark.parametrize("page", sorted({p for p, _ in RUNNABLE}), ids=lambda p: p.name)
def test_each_command_exits_as_the_page_says(page: Path, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    shutil.copytree(REPO / "examples", root / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env.update(
        PROCTOR_HOME=str(tmp_path / "home"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        KEY="sk-docs-0123456789abcdef",
        TRACKER_TOKEN="tracker-docs-0123456789",
        N8N_TOKEN="n8n-docs-0123456789",
    )
    failures = []
    for number, line, expected in commands(page):
        done = subprocess.run(
            ["bash", "-c", line], cwd=root, env=env, capture_output=True, text=True,
            timeout=120, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if done.returncode != expected:
            failures.append(
                f"{page.name}:{number}: {line}\n  exit {done.returncode}, expected {expected}\n"
                f"  {done.stderr.strip()[-400:]}"
            )
    assert not failures, "\n".join(failures)

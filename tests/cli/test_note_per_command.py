"""The note that characters were shown as escapes speaks of what one command printed: escapes
counted in the same process before the command began (a library caller, an earlier in-process
command that never reached its end) never make a later command's clean output carry it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from proctor.cli import paint
from proctor.cli.group import cli
from proctor.core.inert_text import NOTE


def test_escapes_counted_before_a_command_do_not_reach_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCTOR_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".proctor").mkdir()
    assert paint.inert("\x1b[2J") == "\\x1b[2J"  # counted outside any command
    result = CliRunner().invoke(cli, ["history", "--json"])
    assert result.exit_code == 0, result.output
    assert NOTE not in result.output

"""``proctor --help`` without click is the text click writes, at every width it is used for."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from proctor.cli.commands import COMMANDS
from proctor.cli.top_help import terminal_columns, top_help


def _click_help(columns: int, extra: str = "") -> str:
    """What click itself writes for ``proctor --help`` in a process whose COLUMNS is
    ``columns`` (click's test runner forces a width of its own, so a real process is asked)."""
    probe = f"{extra}\nfrom proctor.cli.main import _click_main\n_click_main(['--help'], False)\n"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": str(columns)}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("columns", [80, 81, 100, 132, 300])
def test_equal_to_clicks_help_where_it_answers(columns: int) -> None:
    assert top_help(columns) == _click_help(columns)


@pytest.mark.parametrize("columns", [79, 60, 40])
def test_narrower_terminals_are_left_to_click(columns: int) -> None:
    assert top_help(columns) is None


def test_click_wraps_on_a_narrow_terminal() -> None:
    assert _click_help(60) != _click_help(80)  # what the narrow case leaves to click


_ADD = "from proctor.cli.commands import COMMANDS\nCOMMANDS[{name!r}] = ('m', 'a', {text!r})"


def test_a_command_added_to_the_table_is_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    name, line = "a-longer-name", "A command added late."
    monkeypatch.setitem(COMMANDS, name, ("m", "a", line))
    text = top_help(80)
    assert text is not None and f"  {name}  {line}\n" in text
    assert text == _click_help(80, _ADD.format(name=name, text=line))


def test_a_summary_too_long_for_a_line_is_left_to_click(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(COMMANDS, "long", ("m", "a", "x" * 70))
    assert top_help(300) is None  # click wraps it (its formatter is 78 wide at most)


@pytest.mark.parametrize(("value", "expected"), [("100", 100), ("0", 80), ("wide", 80), ("", 80)])
def test_columns_read_as_shutil_reads_them(
    value: str, expected: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    monkeypatch.setenv("COLUMNS", value)
    assert terminal_columns() == expected == shutil.get_terminal_size().columns


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_the_console_help_loads_no_click(flag: str) -> None:
    probe = (
        "import sys\nfrom proctor.cli.main import main\n"
        f"code = main([{flag!r}])\n"
        "print('click' in sys.modules, code, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "80"}, timeout=60,
    )  # fmt: skip
    assert done.stderr == "False 0\n"
    assert done.stdout.startswith("Usage: proctor [OPTIONS] COMMAND [ARGS]...\n")
    assert click.__name__ == "click"  # click itself still writes every other help

"""``proctor run``'s click-free reader: whatever it accepts, click reads the same way, and
everything else goes to click; a plain run never imports click."""

from __future__ import annotations

import subprocess
from pathlib import Path

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.cli.run import run
from proctor.cli.running import RUN_OPTIONS, parse_run_argv
from tests.cli.probe import probe_cli

_FLAGS = [flag for _name, flags, _kind, _m, _h in RUN_OPTIONS for flag in flags]
_TOKENS = [
    *_FLAGS,
    "-h", "--help", "--", "-", "--json=1", "--drive=", "--input=a=b", "-ia=b", "-i=x",
    "--inputs=-", "--nope", "--inp", "-x", "-ih", "x", "a=b", "", "--", "-5", "ref#m",
]  # fmt: skip


def _click_reads(args: list[str]) -> dict[str, object] | None:
    try:
        return dict(run.make_context("run", list(args)).params)
    except (click.exceptions.Exit, click.ClickException):
        return None


@settings(max_examples=600, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_TOKENS), st.text(max_size=4)), max_size=9))
def test_what_the_reader_accepts_click_reads_the_same(args: list[str]) -> None:
    fast = parse_run_argv(args)
    if fast is not None:
        assert fast == _click_reads(args)


@pytest.mark.parametrize(
    "args",
    [
        ["examples/hello-world", "-i", "message=hi"],
        ["-i", "a=1", "--input=b=2", "-ic=3", "ref", "--json", "--profile", "--json"],
        ["ref", "--max-spend", "0.5", "--authority", "p", "--run-authority", "{}", "--drive"],
        ["ref", "--inputs", "-", "--inputs", "f.json"],
        ["-"],
        [""],
    ],
)
def test_plain_command_lines_are_read_without_click(args: list[str]) -> None:
    fast = parse_run_argv(args)
    assert fast is not None and fast == _click_reads(args)


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--json"],
        ["a", "b"],
        ["ref", "--help"],
        ["ref", "-h"],
        ["ref", "--nope"],
        ["ref", "--inp", "x"],
        ["ref", "--json=yes"],
        ["ref", "--profile"],
        ["ref", "--", "x"],
        ["ref", "--directive", "d"],
        ["ref", "--submit"],
    ],
)
def test_everything_else_is_left_to_click(args: list[str]) -> None:
    assert parse_run_argv(args) is None


def test_a_plain_run_never_imports_click_and_a_refused_one_is_refused_by_click(
    tmp_path: Path,
) -> None:
    hello = Path(__file__).resolve().parents[2] / "examples" / "hello-world"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return probe_cli(tmp_path, ("click",), *args)

    done = cli("run", str(hello), "-i", "message=hi", "--json")
    assert done.stderr.splitlines()[-1] == "exit 0 []", done.stderr
    refused = cli("run", str(hello), "--nope")
    assert refused.stderr.splitlines()[-1] == "exit 2 ['click']"
    assert "No such option '--nope'" in refused.stderr


_RESUME_TOKENS = ["--json", "--submit", "--json=", "-h", "--help", "--", "-", "run1", "a.json", ""]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_RESUME_TOKENS), st.text(max_size=3)), max_size=5))
def test_what_the_resume_reader_accepts_click_reads_the_same(args: list[str]) -> None:
    from proctor.cli.resume import resume
    from proctor.cli.resuming import parse_resume_argv

    fast = parse_resume_argv(args)
    if fast is None:
        return
    assert fast == dict(resume.make_context("resume", list(args)).params)


def test_resume_reads_its_two_arguments_and_leaves_submit_to_click() -> None:
    from proctor.cli.resuming import parse_resume_argv

    assert parse_resume_argv(["r1"]) == {
        "run_id": "r1",
        "source": "-",
        "submit": False,
        "as_json": False,
        "verbose": False,
    }
    assert parse_resume_argv(["--json", "r1", "a.json", "-v"]) == {
        "run_id": "r1", "source": "a.json", "submit": False, "as_json": True, "verbose": True,
    }  # fmt: skip
    for args in ([], ["r1", "a", "b"], ["r1", "--submit"], ["r1", "--help"]):
        assert parse_resume_argv(args) is None

"""``package: fixtures/<dir>``: a test runs a fixture package of the package (one composing
it with others) instead of it, and the path never leads out of the package's fixtures: not by
``..`` (refused when read), not by a link (refused before anything is staged or run; the
package it would reach leaves a mark if it ran)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from proctor.contracts.testfile import FixturePackage
from proctor.errors import ParseError
from proctor.parser.testfile import parse_test_file
from tests.testing.support import ECHO, SKILL_MD, checks, package, run_one, workspace

COMPOSE = """
minimum_proctor: 0.1.0
methods:
  both:
    description: Call the package under test by name, then echo.
    steps:
      - id: child
        skill: echoer#say
        inputs: {text: from-fixture, path: composed.txt}
      - id: after
        tool: echo
        inputs: {text: done}
"""

# A package that would leave a mark where the test's workspace is if it ever ran.
MARKER = """
minimum_proctor: 0.1.0
methods:
  run:
    description: Leave a mark.
    steps:
      - id: mark
        tool: fs.write
        inputs: {path: escaped-mark.txt, content: ran, create: true}
"""

TEST = """
package: fixtures/{dir}
method: {method}
expect:
  status: sealed
  outcome: completed
"""


def _echoer(root: Path, dir_name: str, method: str = "both") -> Path:
    return package(root, "echoer", ECHO, {"t": TEST.format(dir=dir_name, method=method)})


def _write_package(folder: Path, run_yaml: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(SKILL_MD.format(name=folder.name))
    (folder / "run.yaml").write_text(run_yaml.lstrip())


def test_a_fixture_package_runs_and_calls_the_package_under_test(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    folder = _echoer(root, "compose")
    _write_package(folder / "fixtures" / "compose", COMPOSE)
    text = TEST.format(dir="compose", method="both") + (
        "  files: {composed.txt: {content: from-fixture}}\n"
        "  step_outputs: {after: {subset: {text: done}}}\n"
    )
    (folder / "tests" / "t.yaml").write_text(text)
    result = run_one(folder, "t")
    assert result.status == "passed", (result.failures, result.error)


def test_a_nested_fixture_package(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    folder = _echoer(root, "lib/compose")
    _write_package(folder / "fixtures" / "lib" / "compose", COMPOSE)
    result = run_one(folder, "t")
    assert result.status == "passed", (result.failures, result.error)


def _refused(folder: Path) -> str:
    result = run_one(folder, "t", keep=False)
    assert result.status == "error", result
    assert result.error is not None
    return str(result.error["code"])


def test_a_link_to_a_package_outside_is_refused_and_never_runs(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    outside = tmp_path / "outside"
    _write_package(outside, MARKER)
    folder = _echoer(root, "evil", method="run")
    (folder / "fixtures").mkdir()
    os.symlink(outside, folder / "fixtures" / "evil")
    assert _refused(folder) == "test_package_invalid"
    assert not list(tmp_path.rglob("escaped-mark.txt"))


def test_a_link_deeper_in_the_path_is_refused(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    outside = tmp_path / "outside"
    _write_package(outside / "pkg", MARKER)
    folder = _echoer(root, "lib/pkg", method="run")
    (folder / "fixtures").mkdir()
    os.symlink(outside, folder / "fixtures" / "lib")
    assert _refused(folder) == "test_package_invalid"
    assert not list(tmp_path.rglob("escaped-mark.txt"))


def test_a_linked_fixtures_folder_is_refused(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    outside = tmp_path / "outside"
    _write_package(outside / "pkg", MARKER)
    folder = _echoer(root, "pkg", method="run")
    os.symlink(outside, folder / "fixtures")
    assert _refused(folder) == "test_package_invalid"
    assert not list(tmp_path.rglob("escaped-mark.txt"))


def test_a_folder_without_skill_md_and_a_missing_one_are_refused(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    folder = _echoer(root, "empty")
    (folder / "fixtures" / "empty").mkdir(parents=True)
    assert _refused(folder) == "test_package_invalid"
    (folder / "tests" / "t.yaml").write_text(TEST.format(dir="absent", method="both"))
    assert _refused(folder) == "test_package_invalid"


def test_a_skill_md_that_is_a_link_is_refused(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    folder = _echoer(root, "pkg", method="run")
    _write_package(tmp_path / "outside", MARKER)
    inner = folder / "fixtures" / "pkg"
    inner.mkdir(parents=True)
    os.symlink(tmp_path / "outside" / "SKILL.md", inner / "SKILL.md")
    assert _refused(folder) in ("test_package_invalid", "test_fixture_refused")
    assert not list(tmp_path.rglob("escaped-mark.txt"))


@pytest.mark.parametrize(
    "value",
    [
        "fixtures/../../outside",
        "fixtures/a/../../..",
        "fixtures/..",
        "fixtures/.",
        "fixtures/.hidden",
        "/etc",
        "fixtures",
        "fixtures/",
        "tests/x",
        "fixtures/a\\..\\..",
        "fixtures//a",
    ],
)
def test_a_path_out_of_the_fixtures_is_refused_when_read(value: str) -> None:
    quoted = "'" + value.replace("'", "''") + "'"
    with pytest.raises(ParseError) as caught:
        parse_test_file(f"package: {quoted}\nexpect: {{status: sealed}}\n", "t.yaml")
    assert caught.value.code == "test_invalid"
    assert caught.value.details is not None and caught.value.details["path"] == "package"


_ADAPTER: TypeAdapter[str] = TypeAdapter(FixturePackage)


@given(st.text(alphabet="fixtures/.-_a\\~", max_size=40))
def test_every_accepted_path_stays_below_fixtures(value: str) -> None:
    try:
        accepted = _ADAPTER.validate_python(value)
    except ValidationError:
        return
    parts = accepted.split("/")
    assert parts[0] == "fixtures" and len(parts) >= 2
    assert all(p and not p.startswith(".") and "\\" not in p for p in parts)


def test_checks_name_the_failure(tmp_path: Path) -> None:
    """A fixture package's run is checked like any: a wrong expectation fails it."""
    root = workspace(tmp_path / "ws")
    folder = _echoer(root, "compose")
    _write_package(folder / "fixtures" / "compose", COMPOSE)
    (folder / "tests" / "t.yaml").write_text(
        TEST.format(dir="compose", method="both").replace("completed", "failed")
    )
    assert checks(run_one(folder, "t")) == ["outcome"]

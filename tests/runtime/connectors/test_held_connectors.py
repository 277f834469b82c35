"""The connectors a run found, kept while the folders they came from are as they were
(:mod:`proctor.runtime.connectors.held`): every change a check of names, sizes or modification
times alone would miss is seen by the next lookup, and by the next run of one session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.runtime.connectors.held import held_connectors
from tests.runtime.connectors.support import CONNECTOR, RUN_YAML
from tests.runtime.driver_support import (
    age_past_racy_window,
    close_sessions,  # noqa: F401 - the autouse fixture
    edit_keeping_size_and_mtime,
    make_skill,
    make_workspace,
    session,
)

CASES = ("kept", "edited", "added", "removed", "linked", "run")


def _connector(folder: Path, name: str = "tracker") -> Path:
    place = folder / "connectors" / name
    place.mkdir(parents=True)
    manifest = place / "connector.yaml"
    manifest.write_text(CONNECTOR.format(url="http://127.0.0.1:9"))
    return manifest


def _same_size_same_mtime(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert len(old) == len(new) and old in text
    edit_keeping_size_and_mtime(path, text.replace(old, new))


@pytest.fixture(scope="module")
def settled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """A workspace per case, each with a package and a connector, aged past the racily-clean
    window (so what is found there may be kept on its stamps)."""
    roots = {}
    for case in CASES:
        root = make_workspace(tmp_path_factory.mktemp(case))
        steps = "      - id: hop\n        operation: tracker/hop"
        make_skill(root, "s", RUN_YAML.format(steps=steps))
        _connector(root)
        roots[case] = root
    age_past_racy_window()
    yield roots


def _found(root: Path) -> dict[str, object]:
    return dict(held_connectors(root, root / "skills" / "s", "skills/s", {}))


def test_an_unchanged_answer_is_kept(settled: dict[str, Path]) -> None:
    root = settled["kept"]
    first = _found(root)
    assert _found(root)["tracker"] is first["tracker"]  # not read or parsed again


def test_a_manifest_edited_in_place_is_read_again(settled: dict[str, Path]) -> None:
    root = settled["edited"]
    _found(root)
    manifest = root / "connectors" / "tracker" / "connector.yaml"
    _same_size_same_mtime(manifest, "A small issue", "A smoll issue")
    assert _found(root)["tracker"].connector.description == "A smoll issue tracker."  # type: ignore[attr-defined]


def test_a_connector_added_or_removed_is_seen(settled: dict[str, Path]) -> None:
    root = settled["added"]
    assert list(_found(root)) == ["tracker"]
    _connector(root / "skills" / "s", "other")
    (root / "skills" / "s" / "connectors" / "other" / "connector.yaml").write_text(
        CONNECTOR.format(url="http://127.0.0.1:9").replace("name: tracker", "name: other")
    )
    assert sorted(_found(root)) == ["other", "tracker"]
    root = settled["removed"]
    assert list(_found(root)) == ["tracker"]
    (root / "connectors" / "tracker" / "connector.yaml").unlink()
    assert _found(root) == {}


def test_a_connectors_folder_swapped_for_a_link_is_not_read(settled: dict[str, Path]) -> None:
    root = settled["linked"]
    assert list(_found(root)) == ["tracker"]
    (root / "connectors").rename(root / "elsewhere")
    os.symlink(root / "elsewhere", root / "connectors")
    assert _found(root) == {}


def test_an_answer_found_within_the_racy_window_is_not_kept(tmp_path: Path) -> None:
    _connector(tmp_path)
    (tmp_path / "skills" / "s").mkdir(parents=True)
    first = _found(tmp_path)
    assert _found(tmp_path)["tracker"] is not first["tracker"]  # read and parsed again


def test_an_operation_renamed_between_two_runs_of_one_session_refuses_the_next(
    settled: dict[str, Path],
) -> None:
    root = settled["run"]
    s = session(root)
    first = s.run("s", inputs={"issue": "7", "label": "x"}, cwd=root)
    assert first.status == "needs_credential", first  # the operation is there: its key is not
    assert s.run("s", inputs={"issue": "7", "label": "x"}, cwd=root).status == "needs_credential"
    manifest = root / "connectors" / "tracker" / "connector.yaml"
    _same_size_same_mtime(manifest, "  hop:", "  hip:")
    refused = s.run("s", inputs={"issue": "7", "label": "x"}, cwd=root)
    assert refused.outcome == "blocked", refused
    assert refused.refusal is not None and refused.refusal.code == "tool_unknown"

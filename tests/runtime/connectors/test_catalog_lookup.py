"""Where a run's connectors are looked up: asked again on every lookup (a connector added
between two calls of a session is found by the second), and a ``connectors`` folder that is a
link is never read, the workspace's or the package's."""

from __future__ import annotations

import os
from pathlib import Path

from proctor.runtime.connectors.catalog import find_connectors
from tests.runtime.connectors.support import CONNECTOR


def _connector(folder: Path, name: str = "tracker") -> None:
    place = folder / "connectors" / name
    place.mkdir(parents=True)
    (place / "connector.yaml").write_text(CONNECTOR.format(url="http://127.0.0.1:9"))


def test_a_connector_added_between_two_lookups_is_found(tmp_path: Path) -> None:
    package = tmp_path / "skills" / "s"
    package.mkdir(parents=True)
    assert find_connectors(tmp_path, package, "skills/s") == {}
    _connector(tmp_path)
    assert list(find_connectors(tmp_path, package, "skills/s")) == ["tracker"]


def test_a_packages_connector_is_found_and_shadows_the_workspaces(tmp_path: Path) -> None:
    package = tmp_path / "skills" / "s"
    _connector(tmp_path)
    _connector(package)
    found = find_connectors(tmp_path, package, "skills/s")
    assert found["tracker"].source == "skills/s/connectors/tracker/connector.yaml"


def test_a_connectors_folder_that_is_a_link_is_not_read(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    _connector(elsewhere)
    root = tmp_path / "ws"
    package = root / "skills" / "s"
    package.mkdir(parents=True)
    os.symlink(elsewhere / "connectors", root / "connectors")
    os.symlink(elsewhere / "connectors", package / "connectors")
    assert find_connectors(root, package, "skills/s") == {}

"""The package as it ships: the Apache-2.0 LICENSE, classifiers, and an sdist that carries the
docs and the examples (built in-process from a copy of the tree, nothing fetched)."""

from __future__ import annotations

import shutil
import tarfile
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_license_and_metadata() -> None:
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text) > 10_000
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert any(
        c.startswith("Programming Language :: Python :: 3.11") for c in project["classifiers"]
    )


def test_the_sdist_carries_docs_and_examples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_meta = pytest.importorskip("setuptools.build_meta")
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "MANIFEST.in", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, tree / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".proctor")
    for name in ("src", "docs", "examples"):
        shutil.copytree(REPO / name, tree / name, ignore=ignore)
    monkeypatch.chdir(tree)
    built = build_meta.build_sdist(str(tmp_path / "dist"))
    with tarfile.open(tmp_path / "dist" / built) as sdist:
        names = {name.partition("/")[2] for name in sdist.getnames()}
    assert "LICENSE" in names
    assert "docs/cli-json.md" in names and "docs/mcp.md" in names
    assert "examples/hello-world/run.yaml" in names
    assert "examples/hello-world/tests/greet.yaml" in names


def test_the_wheel_carries_every_core_skill_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zipfile

    build_meta = pytest.importorskip("setuptools.build_meta")
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "MANIFEST.in", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, tree / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".proctor")
    shutil.copytree(REPO / "src", tree / "src", ignore=ignore)
    monkeypatch.chdir(tree)
    built = build_meta.build_wheel(str(tmp_path / "dist"))
    with zipfile.ZipFile(tmp_path / "dist" / built) as wheel:
        names = set(wheel.namelist())
    shipped = REPO / "src" / "proctor" / "resources" / "core_skills"
    expected = {
        "proctor/resources/core_skills/" + p.relative_to(shipped).as_posix()
        for p in shipped.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert len(expected) > 30 and expected <= names

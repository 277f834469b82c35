"""Fuzz what install reads: refs, the workspace's tier setting, and a hostile registry's answers.

The hostile registry is an ``httpx.MockTransport`` serving a genuine signed version with parts
replaced; whatever it answers, install raises only a ProctorError or installs exactly the
genuine package.
"""

from __future__ import annotations

import base64
import copy
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.errors import ProctorError
from proctor.receipts.signing import signer_from_seed
from proctor.registry.client import RegistryClient
from proctor.registry.install import install, parse_ref, required_tier
from proctor.runtime.packages.manifest import countersign, sign_statement
from proctor.runtime.packages.package import parse_files
from tests.fuzzing import FUZZ, mutated, only_proctor_errors

_SKILL = b"---\nname: s\ndescription: d\nversion: 1.0.0\n---\nbody\n"
_PACKAGE = parse_files({"SKILL.md": _SKILL, "a/b.txt": b"x"})
_REGISTRY = signer_from_seed(b"r" * 32)
_MANIFEST = countersign(
    _REGISTRY,
    sign_statement(signer_from_seed(b"p" * 32), "acme/s", "1.0.0", _PACKAGE.content_digest),
    namespace="acme",
    tier="verified",
)
_ANSWERS: dict[str, Any] = {
    "version": {"schema": "proctor.registry_version.v1", "name": "acme/s", "manifest": _MANIFEST},
    "archive": {
        "schema": "proctor.registry_archive.v1",
        "files": {rel: base64.b64encode(data).decode() for rel, data in _PACKAGE.files.items()},
    },
}


@pytest.fixture(scope="module")
def workspace() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="proctor-fuzz-install-") as folder:
        (Path(folder) / ".proctor").mkdir()
        yield Path(folder)


@FUZZ
@given(answers=mutated(_ANSWERS))
def test_fuzz_a_hostile_registry_installs_nothing_but_the_genuine_package(
    workspace: Path, answers: Any
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        part = "archive" if request.url.path.endswith("/archive") else "version"
        body = answers.get(part) if isinstance(answers, dict) else answers
        return httpx.Response(200, content=json.dumps(body).encode())

    client = RegistryClient("http://registry.invalid", transport=httpx.MockTransport(handler))
    with client:
        only_proctor_errors(
            lambda: install(
                client, "acme/s@1.0.0", workspace_root=workspace, trusted=[_REGISTRY.public_key]
            )
        )
    added = workspace / ".proctor" / "added-skills" / "acme" / "s" / "1.0.0"
    if added.exists():
        held = {p.relative_to(added).as_posix() for p in added.rglob("*") if p.is_file()}
        assert held == {"SKILL.md", "a/b.txt", "proctor.package.json", "signature.json"}
        assert (added / "a" / "b.txt").read_bytes() == b"x"
    assert not [p for p in (workspace / ".proctor").rglob(".staging-*")]


@settings(FUZZ, max_examples=200)
@given(st.text(max_size=40))
def test_fuzz_refs(text: str) -> None:
    only_proctor_errors(lambda: parse_ref(text))


@settings(FUZZ, max_examples=100)
@given(st.one_of(st.binary(max_size=60), mutated({"required_tier": "verified"}).map(json.dumps)))
def test_fuzz_the_tier_setting(workspace: Path, data: bytes | str) -> None:
    path = workspace / ".proctor" / "registry.json"
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    try:
        only_proctor_errors(lambda: required_tier(workspace))
    finally:
        path.unlink()


def test_the_genuine_answers_install(tmp_path: Path) -> None:
    (tmp_path / ".proctor").mkdir()
    answers = copy.deepcopy(_ANSWERS)

    def handler(request: httpx.Request) -> httpx.Response:
        part = "archive" if request.url.path.endswith("/archive") else "version"
        return httpx.Response(200, json=answers[part])

    with RegistryClient("http://registry.invalid", transport=httpx.MockTransport(handler)) as c:
        done = install(c, "acme/s@1.0.0", workspace_root=tmp_path, trusted=[_REGISTRY.public_key])
    assert done.status == "installed"


def test_deeply_nested_json_is_refused_cleanly(tmp_path: Path) -> None:
    deep = b"[" * 100_000
    (tmp_path / ".proctor").mkdir()
    (tmp_path / ".proctor" / "registry.json").write_bytes(deep)
    only_proctor_errors(lambda: required_tier(tmp_path))

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=deep)

    with RegistryClient("http://registry.invalid", transport=httpx.MockTransport(handler)) as c:
        only_proctor_errors(lambda: c.version("acme/s", None))


def test_an_answer_or_a_setting_that_repeats_a_key_is_refused(tmp_path: Path) -> None:
    # read leniently, the last of two keys wins: a registry (or a settings file) could then
    # mean one thing to proctor and another to whatever else reads the same bytes
    (tmp_path / ".proctor").mkdir()
    settings_file = tmp_path / ".proctor" / "registry.json"
    settings_file.write_text('{"required_tier": "first_party", "required_tier": "community"}')
    with pytest.raises(ProctorError) as caught:
        required_tier(tmp_path)
    assert caught.value.code == "registry_settings_invalid"
    settings_file.unlink()

    def handler(request: httpx.Request) -> httpx.Response:
        part = "archive" if request.url.path.endswith("/archive") else "version"
        text = json.dumps(_ANSWERS[part])
        return httpx.Response(200, content=(text[:-1] + ', "schema": "x"}').encode())

    client = RegistryClient("http://registry.invalid", transport=httpx.MockTransport(handler))
    with client, pytest.raises(ProctorError) as refused:
        install(client, "acme/s@1.0.0", workspace_root=tmp_path, trusted=[_REGISTRY.public_key])
    assert refused.value.code == "registry_answer_invalid"
    assert "duplicate_key" in refused.value.message
    assert not (tmp_path / ".proctor" / "added-skills").exists()

"""The package projection: deterministic digests, safe names, and the parsers under fuzz."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.errors import ProctorError
from proctor.receipts.signing import signer_from_seed
from proctor.runtime.packages.manifest import (
    countersign,
    parse_manifest,
    sign_statement,
    verify_manifest,
)
from proctor.runtime.packages.package import package_folder, parse_files
from tests.fuzzing import FUZZ, mutated, only_proctor_errors
from tests.registry.conftest import write_skill


def test_two_builds_in_two_temp_folders_give_the_same_digest(tmp_path: Path) -> None:
    first = write_skill(tmp_path / "one" / "summarise", version=None)
    second = write_skill(tmp_path / "elsewhere" / "deeper" / "copy", version=None)
    # Different mtimes, modes and creation order must not matter; names and bytes do.
    os.utime(first / "SKILL.md", (1, 1))
    (second / "prompts" / "style.txt").chmod(0o600)
    (first / ".git").mkdir()
    (first / ".git" / "HEAD").write_text("ref: main\n")
    a, b = package_folder(first), package_folder(second)
    assert a.content_digest == b.content_digest
    assert a.version == b.version == "sha-" + a.content_digest[7:19]
    assert a.document() == b.document()
    assert ".git/HEAD" not in a.files
    (second / "prompts" / "style.txt").write_text("plain words!\n")
    assert package_folder(second).content_digest != a.content_digest


def test_dot_files_such_as_env_are_never_packaged(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "summarise")
    (folder / ".env").write_text("API_KEY=sk-live-not-for-the-registry\n")
    (folder / "prompts" / ".secret").write_text("hidden\n")
    built = package_folder(folder)
    assert sorted(built.files) == ["SKILL.md", "prompts/style.txt"]
    assert all(b"sk-live" not in data for data in built.files.values())


def test_a_named_version_and_the_package_file_are_not_content(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "summarise", version="1.2.0")
    built = package_folder(folder)
    (folder / "proctor.package.json").write_text("{}")
    assert package_folder(folder).content_digest == built.content_digest
    assert built.version == "1.2.0"


@pytest.mark.parametrize(
    "name",
    [
        "../x",
        "a/../../x",
        "/etc/passwd",
        "a\\b",
        "a//b",
        "./a",
        "a/./b",
        "signature.json",
        "a\x00b",
        "a\nb",
        "",
    ],
)
def test_unsafe_file_names_are_refused(name: str) -> None:
    files = {"SKILL.md": b"---\nname: s\ndescription: d\n---\n", name: b"x"}
    with pytest.raises(ProctorError) as caught:
        parse_files(files)
    assert caught.value.code == "package_path_invalid"


def test_a_name_that_is_both_file_and_folder_is_refused() -> None:
    files = {"SKILL.md": b"---\nname: s\ndescription: d\n---\n", "a": b"1", "a/b": b"2"}
    with pytest.raises(ProctorError) as caught:
        parse_files(files)
    assert caught.value.code == "package_path_invalid"


def test_a_symlink_in_a_package_is_refused(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "summarise")
    (folder / "leak").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ProctorError) as caught:
        package_folder(folder)
    assert caught.value.code == "package_symlink"


_NAMES = st.lists(
    st.sampled_from(["a", "b", ".", "..", "", "SKILL.md", "a\\b", "\x00", "é", "e\u0301"]),
    min_size=1,
    max_size=4,
).map("/".join)


@FUZZ
@given(st.dictionaries(_NAMES, st.binary(max_size=20), max_size=5), st.booleans())
def test_fuzz_package_files_only_refuse_cleanly(files: dict[str, bytes], with_skill: bool) -> None:
    if with_skill:
        files["SKILL.md"] = b"---\nname: s\ndescription: d\n---\n"

    def parse() -> None:
        built = parse_files(files)
        for rel in built.files:  # anything accepted stays inside the package folder
            assert ".." not in rel.split("/") and not rel.startswith("/")

    only_proctor_errors(parse)


_REGISTRY = signer_from_seed(b"r" * 32)
_PUBLISHER = signer_from_seed(b"p" * 32)
_MANIFEST = countersign(
    _REGISTRY,
    sign_statement(_PUBLISHER, "acme/x", "1.0.0", "sha256:" + "1" * 64),
    namespace="acme",
    tier="verified",
)


def test_the_manifest_verifies_and_every_field_is_signed() -> None:
    assert verify_manifest(_MANIFEST, [_REGISTRY.public_key]).name == "acme/x"
    for field, value in [("tier", "first_party"), ("version", "2.0.0"), ("name", "acme/y")]:
        with pytest.raises(ProctorError) as caught:
            verify_manifest({**_MANIFEST, field: value}, [_REGISTRY.public_key])
        assert caught.value.code == "signature_invalid"


def test_a_manifest_for_a_name_outside_its_namespace_is_refused() -> None:
    bad = countersign(
        _REGISTRY,
        sign_statement(_PUBLISHER, "acme/x", "1.0.0", "sha256:" + "1" * 64),
        namespace="other",
        tier="verified",
    )
    with pytest.raises(ProctorError) as caught:
        verify_manifest(bad, [_REGISTRY.public_key])
    assert caught.value.code == "namespace_mismatch"


def test_a_publisher_signature_by_another_key_is_refused() -> None:
    said = sign_statement(signer_from_seed(b"q" * 32), "acme/x", "1.0.0", "sha256:" + "1" * 64)
    said["publisher_key"] = _PUBLISHER.public_key.raw.hex()  # claims acme's key
    forged = countersign(_REGISTRY, said, namespace="acme", tier="verified")
    with pytest.raises(ProctorError) as caught:
        verify_manifest(forged, [_REGISTRY.public_key])
    assert caught.value.code == "signature_invalid"


@FUZZ
@given(mutated(_MANIFEST))
def test_fuzz_manifest_documents_only_refuse_cleanly(doc: object) -> None:
    only_proctor_errors(lambda: verify_manifest(json.dumps(doc).encode(), [_REGISTRY.public_key]))


@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_manifest_bytes_only_refuse_cleanly(data: bytes) -> None:
    only_proctor_errors(lambda: verify_manifest(data, [_REGISTRY.public_key]))


def test_base64_is_required_for_signatures() -> None:
    with pytest.raises(ProctorError) as caught:
        verify_manifest({**_MANIFEST, "registry_signature": "!!"}, [_REGISTRY.public_key])
    assert caught.value.code == "manifest_invalid"
    assert base64.b64decode(_MANIFEST["registry_signature"])


def test_a_manifest_that_names_a_field_twice_is_refused() -> None:
    # read leniently, the second name would win here while a reader keeping the first saw
    # another version of the package under the same signatures
    text = json.dumps(_MANIFEST)
    assert parse_manifest(text.encode()).version == _MANIFEST["version"]
    twice = text.replace('"version": ', '"version": "9.9.9", "version": ', 1)
    with pytest.raises(ProctorError) as caught:
        parse_manifest(twice.encode())
    assert caught.value.code == "manifest_invalid"
    assert "duplicate_key" in caught.value.message

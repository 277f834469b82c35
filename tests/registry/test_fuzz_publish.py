"""Fuzz the registry's publish entry point: arbitrary bodies are refused cleanly, store nothing."""

from __future__ import annotations

import base64
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.errors import ProctorError
from proctor.receipts.signing import signer_from_seed
from proctor.registry.server import _publish
from proctor.registry.store import RegistryStore
from proctor.runtime.packages.manifest import sign_statement
from proctor.runtime.packages.package import parse_files
from tests.fuzzing import FUZZ, mutated, only_proctor_errors, spliced

_SKILL = b"---\nname: s\ndescription: d\n---\nbody\n"
_PACKAGE = parse_files({"SKILL.md": _SKILL})
_KEY = signer_from_seed(b"f" * 32)
_VALID = {
    "statement": sign_statement(_KEY, "acme/s", _PACKAGE.version, _PACKAGE.content_digest),
    "files": {"SKILL.md": base64.b64encode(_SKILL).decode()},
}


@pytest.fixture(scope="module")
def store() -> Iterator[tuple[RegistryStore, str]]:
    with tempfile.TemporaryDirectory(prefix="proctor-fuzz-registry-") as folder:
        opened = RegistryStore(Path(folder))
        try:
            yield opened, opened.add_publisher("acme", _KEY.public_key, "community")
        finally:
            opened.close()


def _check(store: tuple[RegistryStore, str], body: bytes) -> None:
    held, token = store
    only_proctor_errors(lambda: _publish(held, token, body))
    for row in held.versions("acme/s"):  # only the genuine package can ever be stored
        assert row["content_digest"] == _PACKAGE.content_digest


@FUZZ
@given(doc=mutated(_VALID))
def test_fuzz_publish_documents(store: tuple[RegistryStore, str], doc: object) -> None:
    _check(store, json.dumps(doc).encode())


@settings(FUZZ, max_examples=150)
@given(text=spliced(json.dumps(_VALID)))
def test_fuzz_publish_text(store: tuple[RegistryStore, str], text: str) -> None:
    _check(store, text.encode("utf-8", "surrogatepass"))


@settings(FUZZ, max_examples=100)
@given(data=st.binary(max_size=300))
def test_fuzz_publish_bytes(store: tuple[RegistryStore, str], data: bytes) -> None:
    _check(store, data)


@pytest.mark.parametrize("repeated", ["files", "statement", "schema"])
def test_a_body_that_repeats_a_key_is_refused_and_stores_nothing(
    store: tuple[RegistryStore, str], repeated: str
) -> None:
    # the genuine package, with one key given twice: read leniently, the last would win
    held, token = store
    text = json.dumps(_VALID)
    if repeated == "files":
        text = text[:-1] + ', "files": {}}'
    elif repeated == "statement":
        text = '{"statement": {}, ' + text[1:]
    else:
        text = text.replace('"schema": ', '"schema": "x", "schema": ', 1)
    before = list(held.versions("acme/s"))
    with pytest.raises(ProctorError) as caught:
        _publish(held, token, text.encode())
    assert caught.value.code == "request_invalid"
    assert "repeats" in caught.value.message or "duplicate" in caught.value.message
    assert list(held.versions("acme/s")) == before

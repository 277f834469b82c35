"""Fuzz the connector package paths: a publish of a connector package with one part replaced by
anything, and a signed connector manifest with one part replaced, are refused cleanly; only the
genuine connector is ever stored, and no altered manifest verifies."""

from __future__ import annotations

import base64
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.receipts.signing import signer_from_seed
from proctor.registry.server import _publish
from proctor.registry.store import RegistryStore
from proctor.runtime.packages.manifest import countersign, sign_statement, verify_manifest
from proctor.runtime.packages.package import parse_files
from tests.fuzzing import FUZZ, mutated, only_proctor_errors, spliced

_CONNECTOR = (
    b"name: tracker\nbase_url: https://tracker.example.com\noperations:\n"
    b"  issue.read:\n    verb: read\n    request: {method: GET, path: /issues}\n"
)
_PACKAGE = parse_files({"connector.yaml": _CONNECTOR})
_KEY = signer_from_seed(b"c" * 32)
_REGISTRY = signer_from_seed(b"r" * 32)
_SAID = sign_statement(_KEY, "acme/tracker", _PACKAGE.version, _PACKAGE.content_digest, "connector")
_VALID = {"statement": _SAID, "files": {"connector.yaml": base64.b64encode(_CONNECTOR).decode()}}
_MANIFEST = countersign(_REGISTRY, _SAID, namespace="acme", tier="verified")


@pytest.fixture(scope="module")
def store() -> Iterator[tuple[RegistryStore, str]]:
    with tempfile.TemporaryDirectory(prefix="proctor-fuzz-connectors-") as folder:
        opened = RegistryStore(Path(folder))
        try:
            yield opened, opened.add_publisher("acme", _KEY.public_key, "community")
        finally:
            opened.close()


def _check(store: tuple[RegistryStore, str], body: bytes) -> None:
    held, token = store
    only_proctor_errors(lambda: _publish(held, token, body))
    for row in held.versions("acme/tracker"):  # only the genuine connector can ever be stored
        assert row["content_digest"] == _PACKAGE.content_digest


def test_the_genuine_connector_publishes_and_verifies() -> None:
    assert _PACKAGE.kind == "connector"
    assert verify_manifest(_MANIFEST, [_REGISTRY.public_key]).kind == "connector"


@FUZZ
@given(doc=mutated(_VALID))
def test_fuzz_connector_publish_documents(store: tuple[RegistryStore, str], doc: object) -> None:
    _check(store, json.dumps(doc).encode())


@settings(FUZZ, max_examples=150)
@given(text=spliced(json.dumps(_VALID)))
def test_fuzz_connector_publish_text(store: tuple[RegistryStore, str], text: str) -> None:
    _check(store, text.encode("utf-8", "surrogatepass"))


@FUZZ
@given(doc=mutated(_MANIFEST))
def test_fuzz_connector_manifests(doc: object) -> None:
    def verify() -> None:
        held = verify_manifest(doc, [_REGISTRY.public_key])  # type: ignore[arg-type]
        assert doc == _MANIFEST and held.kind == "connector"  # nothing altered verifies

    only_proctor_errors(verify)


@settings(FUZZ, max_examples=150)
@given(text=st.text(max_size=400))
def test_fuzz_connector_files(text: str) -> None:
    only_proctor_errors(lambda: parse_files({"connector.yaml": text.encode()}))

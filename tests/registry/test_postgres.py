"""The registry's index on a real PostgreSQL (``PROCTOR_TEST_DATABASE_URL``), through HTTP."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.errors import ProctorError
from proctor.registry.install import install, resolve_installed
from proctor.registry.store import RegistryStore
from proctor.runtime.packages.manifest import sign_statement
from proctor.runtime.packages.package import package_folder
from tests.registry.conftest import make_registry, serve, write_skill

URL = os.environ.get("PROCTOR_TEST_DATABASE_URL")


@pytest.fixture
def schema_url() -> Iterator[str]:
    if not URL:
        pytest.skip("PROCTOR_TEST_DATABASE_URL is not set (.ci/run sets it)")
    psycopg = pytest.importorskip("psycopg")
    schema = "registry_test_" + secrets.token_hex(4)
    with psycopg.connect(URL, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in URL else "?"
    try:
        yield f"{URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(URL, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def test_publish_search_and_install_with_the_index_on_postgres(
    schema_url: str, tmp_path: Path
) -> None:
    store = RegistryStore(tmp_path / "registry-data", schema_url)
    try:
        with serve(store) as url:
            reg = make_registry(tmp_path / "registry-data", url, store)
            built = package_folder(write_skill(tmp_path / "summarise"))
            said = sign_statement(reg.acme, "acme/summarise", built.version, built.content_digest)
            with reg.client(reg.acme_token) as client:
                assert client.publish(said, built)["status"] == "published"
                assert client.publish(said, built)["status"] == "unchanged"
            write_skill(tmp_path / "other", version="1.0.0")
            (tmp_path / "other" / "prompts" / "style.txt").write_text("x\n")
            changed = package_folder(tmp_path / "other")
            with reg.client(reg.acme_token) as client, pytest.raises(ProctorError) as caught:
                client.publish(
                    sign_statement(
                        reg.acme, "acme/summarise", changed.version, changed.content_digest
                    ),
                    changed,
                )
            assert caught.value.code == "version_exists"
            root = tmp_path / "ws"
            (root / ".proctor").mkdir(parents=True)
            trusted = [store.signer.public_key]
            with reg.client() as client:
                assert client.search("SUMMAR")[0]["name"] == "acme/summarise"
                install(client, "acme/summarise@1.0.0", workspace_root=root, trusted=trusted)
            assert resolve_installed("acme/summarise", workspace_root=root, trusted=trusted)
            # a connector package, and the rule that a name keeps its kind, on PostgreSQL too
            folder = tmp_path / "tracker"
            folder.mkdir()
            (folder / "connector.yaml").write_text(
                "name: tracker\nbase_url: https://tracker.example.com\noperations:\n"
                "  issue.read: {verb: read, request: {method: GET, path: /issues}}\n"
            )
            connector = package_folder(folder)
            as_connector = sign_statement(
                reg.acme, "acme/tracker", connector.version, connector.content_digest, "connector"
            )
            with reg.client(reg.acme_token) as client:
                assert client.publish(as_connector, connector)["status"] == "published"
                renamed = package_folder(write_skill(tmp_path / "tracker-skill", name="tracker"))
                with pytest.raises(ProctorError) as kind:
                    client.publish(
                        sign_statement(
                            reg.acme, "acme/tracker", renamed.version, renamed.content_digest
                        ),
                        renamed,
                    )
            assert kind.value.code == "kind_mismatch"
            with reg.client() as client:
                done = install(client, "acme/tracker", workspace_root=root, trusted=trusted)
            assert done.folder.parent.parent.parent.name == "added-connectors"
    finally:
        store.close()

"""The state store contract with two packages of one name, on SQLite, PostgreSQL and Redis.

Four packages all call themselves ``summ`` (or, for the last, ``repo-summary``, a core skill's
name): two folders of the workspace, one installed from the registry (``acme/summ``), and a
folder named like the core skill. Each keeps state under its own identity, so none reads or
overwrites another's, nor what the core skill (or a store written before identities, keyed by
the name alone) keeps; and each one's connector write with the same idempotency key reaches
the counting loopback provider.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.registry.install import install, trust_registry_key, trusted_registry_keys
from proctor.runtime.packages.manifest import sign_statement
from proctor.runtime.packages.package import package_folder
from proctor.runtime.storage.select import close_state_stores, open_state_store
from tests.registry.conftest import Registry
from tests.registry.conftest import home as home  # fixture re-export
from tests.registry.conftest import registry as registry  # fixture re-export
from tests.runtime.connectors.support import CANARY, CONNECTOR
from tests.runtime.connectors.tracker import TrackerServer
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_workspace,
    session,
)

RUN_YAML = """minimum_proctor: 0.1.0
credentials:
  tracker:
    provider: tracker
    auth:
      api_key: {delivery: {env: TRACKER_TOKEN}}
methods:
  keep:
    description: Read the shared key, then set it.
    inputs:
      type: object
      properties: {value: {type: string}}
      required: [value]
    steps:
      - id: before
        tool: store.key.get
        inputs: {key: shared}
      - id: put
        tool: store.key.put
        idempotency_key: $input.value
        inputs: {key: shared, value: $input.value}
    result_from: [before, put]
  label:
    description: Label an issue with one idempotency key.
    inputs:
      type: object
      properties: {issue: {type: string}, label: {type: string}}
      required: [issue, label]
    steps:
      - id: label
        operation: tracker/issue.label
        idempotency_key: "42"
        inputs: {issue: $input.issue, label: $input.label}
"""


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def backend(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The environment that selects the state store backend (a schema or prefix of its own)."""
    unique = "t" + uuid.uuid4().hex[:12]
    if request.param == "sqlite":
        yield {}
        close_state_stores()
        return
    name = "PROCTOR_TEST_DATABASE_URL" if request.param == "postgres" else "PROCTOR_TEST_REDIS_URL"
    url = os.environ.get(name)
    if not url:
        pytest.skip(f"{name} is unset: no {request.param} to test against")
    prefix = unique if request.param == "postgres" else f"proctor-test:{unique}"
    yield {"PROCTOR_STORE_URL": url, "PROCTOR_STORE_PREFIX": prefix}
    close_state_stores()
    if request.param == "postgres":
        from proctor.runtime.storage.postgres import PostgresStateStore

        pg = PostgresStateStore(url, schema=prefix)
        pg.drop()
        pg.close()
    else:
        from proctor.runtime.storage.redis import RedisStateStore

        rs = RedisStateStore(url, prefix=prefix)
        rs.drop()
        rs.close()


@pytest.fixture
def server() -> Iterator[TrackerServer]:
    running = TrackerServer()
    running.tracker.issues["7"] = {"id": "7", "title": "Crash", "labels": [], "comments": []}
    try:
        yield running
    finally:
        running.stop()


def _package(folder: Path, name: str, url: str, version: str = "") -> Path:
    folder.mkdir(parents=True)
    front = f"name: {name}\ndescription: The same name in every folder.\n{version}"
    (folder / "SKILL.md").write_text(f"---\n{front}---\nBody.\n")
    (folder / "run.yaml").write_text(RUN_YAML)
    (folder / "connectors" / "tracker").mkdir(parents=True)
    (folder / "connectors" / "tracker" / "connector.yaml").write_text(CONNECTOR.format(url=url))
    return folder


def test_four_packages_of_one_name_keep_their_own_state_and_writes(
    backend: dict[str, str],
    registry: Registry,
    home: Path,
    server: TrackerServer,
    tmp_path: Path,
) -> None:
    url = server.tracker.url
    built = package_folder(_package(tmp_path / "src" / "summ", "summ", url, "version: 1.0.0\n"))
    statement = sign_statement(registry.acme, "acme/summ", built.version, built.content_digest)
    with registry.client(registry.acme_token) as client:
        client.publish(statement, built)
    trust_registry_key(registry.store.signer.public_key, os.environ)
    ws = make_workspace(tmp_path / "ws")
    with registry.client() as client:
        install(client, "acme/summ@1.0.0", workspace_root=ws,
                trusted=trusted_registry_keys(os.environ))  # fmt: skip
    (ws / "proctor.toml").write_text('[egress]\nallow = ["127.0.0.1"]\n')
    _package(ws / "skills" / "summ", "summ", url)
    _package(ws / "team" / "summ", "summ", url)
    _package(ws / "skills" / "repo-summary", "repo-summary", url)
    environ = {"PROCTOR_HOME": str(home), **backend}
    # what the core skill keeps, and what a store keyed by the name alone kept
    state = open_state_store(environ, ws / ".proctor")
    state.put("core:repo-summary", "shared", "core-private", "seed-core")
    state.put("summ", "shared", "name-keyed-private", "seed-name")
    packages = {
        "skills/summ": "local:skills/summ",
        "team/summ": "local:team/summ",
        "acme/summ@1.0.0": "registry:acme/summ",
        "skills/repo-summary": "local:skills/repo-summary",
    }
    for ref in packages:
        env = session(ws, environ=environ).run(
            f"{ref}#keep", inputs={"value": f"{ref}-private"}, cwd=ws
        )
        assert env.outcome == "completed", (ref, env.refusal)
        assert env.result["before"] == {"found": False, "value": None, "version": None}, ref
    for ref, identity in packages.items():
        again = session(ws, environ=environ).run(f"{ref}#keep", inputs={"value": "2nd"}, cwd=ws)
        assert again.result["before"]["value"] == f"{ref}-private", ref  # its own, unchanged
        assert state.get(identity, "shared")["value"] == "2nd"
    assert state.get("core:repo-summary", "shared")["value"] == "core-private"
    assert state.get("summ", "shared")["value"] == "name-keyed-private"
    # the same connector key from each package: every write is sent
    for ref in packages:
        env = session(ws, environ=environ).run(
            f"{ref}#label", inputs={"issue": "7", "label": "bug"}, cwd=ws,
            request_secrets={"tracker": CANARY},
        )  # fmt: skip
        assert env.outcome == "completed", (ref, env.refusal)
    assert server.tracker.writes == len(packages)
    assert len(set(server.tracker.idempotency_keys)) == len(packages)


def test_a_moved_folder_is_a_new_package_until_its_state_is_migrated(
    backend: dict[str, str], tmp_path: Path
) -> None:
    import json
    import shutil
    import subprocess
    import sys

    ws = make_workspace(tmp_path / "ws")
    _package(ws / "skills" / "summ", "summ", "http://127.0.0.1:9")
    environ = {"PROCTOR_HOME": str(ws / ".home"), **backend}
    first = session(ws, environ=environ).run("skills/summ#keep", inputs={"value": "kept"}, cwd=ws)
    assert first.outcome == "completed", first.refusal
    shutil.move(ws / "skills" / "summ", ws / "team-summ")
    moved = session(ws, environ=environ).run("team-summ#keep", inputs={"value": "new"}, cwd=ws)
    assert moved.result["before"]["found"] is False  # a new identity: none of the old state

    def proctor(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "proctor", "store", "migrate", *args, "--json"],
            cwd=ws, capture_output=True, text=True, env={**os.environ, **environ}, timeout=120,
        )  # fmt: skip

    refused = proctor("--from", "local:skills/summ", "--to", "local:team-summ")
    assert refused.returncode != 0 and "store_target_not_empty" in refused.stderr
    bad = proctor("--from", "summ", "--to", "local:x")
    assert bad.returncode != 0 and "store_identity_invalid" in bad.stderr
    done = proctor("--from", "local:skills/summ", "--to", "local:elsewhere")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "proctor.store_migrate.v1"
    assert doc["moved"] == {"events": 0, "keys": 1, "writes": 1}
    audit = (ws / ".proctor" / "audit.jsonl").read_text()
    assert '"store_migrated"' in audit and "local:elsewhere" in audit
    shutil.move(ws / "team-summ", ws / "elsewhere")
    again = session(ws, environ=environ).run("elsewhere#keep", inputs={"value": "3rd"}, cwd=ws)
    assert again.result["before"]["value"] == "kept"  # the state followed the migration

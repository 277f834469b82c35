"""Connector packages: a connector published on its own is packaged, signed, published and
installed as a skill package is (the same statement, manifest, tiers and verification), lands
in ``.proctor/added-connectors/<publisher>/<name>/<version>/``, and a run of a workspace skill
uses it, verified against its signature on every read."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from proctor.errors import ProctorError
from proctor.registry.install import install, set_required_tier, trust_registry_key
from proctor.runtime.connectors.catalog import find_connectors
from proctor.runtime.packages.installed import trusted_registry_keys
from proctor.runtime.packages.manifest import sign_statement
from proctor.runtime.packages.package import Package, package_folder
from tests.registry.conftest import Registry, write_skill
from tests.runtime.connectors.support import CANARY, CONNECTOR, READ, RUN_YAML
from tests.runtime.connectors.tracker import TrackerServer
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)

INPUTS = {"issue": "7", "label": "bug"}


@pytest.fixture
def server() -> Iterator[TrackerServer]:
    running = TrackerServer()
    running.tracker.issues["7"] = {"id": "7", "title": "Crash", "labels": [], "comments": []}
    try:
        yield running
    finally:
        running.stop()


def write_connector(folder: Path, url: str) -> Path:
    (folder).mkdir(parents=True, exist_ok=True)
    (folder / "connector.yaml").write_text(CONNECTOR.format(url=url))
    (folder / "README.md").write_text("The tracker's API.\n")
    return folder


def publish(reg: Registry, built: Package, namespace: str = "acme", kind: str | None = None):  # type: ignore[no-untyped-def]
    signer, token = (
        (reg.acme, reg.acme_token) if namespace == "acme" else (reg.hobby, reg.hobby_token)
    )
    said = sign_statement(
        signer, f"{namespace}/{built.name}", built.version, built.content_digest,
        kind or built.kind,
    )  # fmt: skip
    with reg.client(token) as client:
        return client.publish(said, built)


def workspace(tmp_path: Path) -> Path:
    """A workspace allowing loopback egress with a skill that reads through ``tracker`` and
    keeps no connector of its own."""
    ws = make_workspace(tmp_path / "ws")
    (ws / "proctor.toml").write_text('[egress]\nallow = ["127.0.0.1"]\n')
    make_skill(ws, "triage", RUN_YAML.format(steps=READ))
    return ws


def _run(ws: Path, home: Path) -> object:
    s = session(ws, environ={"PROCTOR_HOME": str(home)})
    return s.run("triage", inputs=INPUTS, cwd=ws, request_secrets={"tracker": CANARY})


def test_package_publish_install_and_use(
    registry: Registry, home: Path, tmp_path: Path, server: TrackerServer
) -> None:
    built = package_folder(write_connector(tmp_path / "src" / "tracker", server.tracker.url))
    assert (built.kind, built.name) == ("connector", "tracker")
    assert built.version == "sha-" + built.content_digest[7:19]
    assert built.document()["kind"] == "connector"
    answer = publish(registry, built)
    assert answer["status"] == "published" and answer["manifest"]["kind"] == "connector"
    trust_registry_key(registry.store.signer.public_key, os.environ)
    ws = workspace(tmp_path)
    with registry.client() as client:
        done = install(
            client, "acme/tracker", workspace_root=ws, trusted=trusted_registry_keys(os.environ)
        )
    folder = ws / ".proctor" / "added-connectors" / "acme" / "tracker" / built.version
    assert done.folder == folder and done.status == "installed" and done.tier == "verified"
    assert json.loads((folder / "signature.json").read_bytes())["kind"] == "connector"
    assert not (ws / ".proctor" / "added-skills").exists()
    found = find_connectors(ws, environ=os.environ)
    assert found["tracker"].identity == "registry:acme/tracker"
    env = _run(ws, home)
    assert env.outcome == "completed", env.refusal  # type: ignore[attr-defined]
    assert server.tracker.hits == {"GET /api/issues/7": 1}
    assert server.tracker.authorizations == [f"Bearer {CANARY}"]


def test_a_tampered_installed_connector_is_refused_and_sends_nothing(
    registry: Registry, home: Path, tmp_path: Path, server: TrackerServer
) -> None:
    built = package_folder(write_connector(tmp_path / "src" / "tracker", server.tracker.url))
    publish(registry, built)
    trust_registry_key(registry.store.signer.public_key, os.environ)
    ws = workspace(tmp_path)
    with registry.client() as client:
        done = install(
            client, "acme/tracker", workspace_root=ws, trusted=trusted_registry_keys(os.environ)
        )
    manifest = done.folder / "connector.yaml"
    # the attack: an edited request path (the credential would go with it); nothing is sent
    manifest.write_text(manifest.read_text().replace("issues/{issue}", "issues/{issue}/x", 1))
    env = _run(ws, home)
    assert env.outcome != "completed"  # type: ignore[attr-defined]
    assert env.refusal is not None and env.refusal.code == "package_modified"  # type: ignore[attr-defined]
    assert server.tracker.hits == {} and server.tracker.authorizations == []
    # a connector signed by a registry nobody here trusts is refused the same way
    manifest.write_text(CONNECTOR.format(url=server.tracker.url))
    with pytest.raises(ProctorError) as untrusted:
        find_connectors(ws, environ={"PROCTOR_HOME": str(tmp_path / "other-home")})
    assert untrusted.value.code == "registry_untrusted"


def test_tiers_hold_for_connectors_at_install_and_at_every_load(
    registry: Registry, home: Path, tmp_path: Path, server: TrackerServer
) -> None:
    built = package_folder(write_connector(tmp_path / "src" / "tracker", server.tracker.url))
    publish(registry, built, namespace="hobby")  # a community publisher
    trust_registry_key(registry.store.signer.public_key, os.environ)
    trusted = trusted_registry_keys(os.environ)
    ws = workspace(tmp_path)
    set_required_tier(ws, "verified")
    with registry.client() as client:
        with pytest.raises(ProctorError) as low:
            install(client, "hobby/tracker", workspace_root=ws, trusted=trusted)
        assert low.value.code == "tier_too_low"
        assert not (ws / ".proctor" / "added-connectors").exists()
        set_required_tier(ws, "community")
        install(client, "hobby/tracker", workspace_root=ws, trusted=trusted)
    set_required_tier(ws, "verified")  # raised after the install: the connector no longer loads
    env = _run(ws, home)
    assert env.refusal is not None and env.refusal.code == "tier_too_low"  # type: ignore[attr-defined]
    assert server.tracker.hits == {}


def test_the_kind_is_signed_and_a_name_keeps_its_kind(
    registry: Registry, home: Path, tmp_path: Path, server: TrackerServer
) -> None:
    built = package_folder(write_connector(tmp_path / "src" / "tracker", server.tracker.url))
    # a connector's files under a statement signed as a skill: not what was uploaded
    with pytest.raises(ProctorError) as as_skill:
        publish(registry, built, kind="skill")
    assert as_skill.value.code == "statement_mismatch"
    # a skill already holds the name: a connector takes one of its own
    publish(registry, package_folder(write_skill(tmp_path / "src2" / "tracker", name="tracker")))
    with pytest.raises(ProctorError) as taken:
        publish(registry, built)
    assert taken.value.code == "kind_mismatch"
    # a signed skill is never installed where connectors live, nor read as one
    trust_registry_key(registry.store.signer.public_key, os.environ)
    ws = workspace(tmp_path)
    with registry.client() as client:
        done = install(
            client, "acme/tracker", workspace_root=ws, trusted=trusted_registry_keys(os.environ)
        )
    assert done.folder.parent.parent.parent.name == "added-skills"
    moved = ws / ".proctor" / "added-connectors" / "acme"
    moved.mkdir(parents=True)
    done.folder.parent.rename(moved / "tracker")
    with pytest.raises(ProctorError) as kind:
        find_connectors(ws, environ=os.environ)
    assert kind.value.code == "manifest_mismatch"


def test_the_workspace_connector_shadows_an_installed_one(
    registry: Registry, home: Path, tmp_path: Path, server: TrackerServer
) -> None:
    publish(
        registry,
        package_folder(
            write_connector(tmp_path / "src" / "tracker", "https://tracker.example.com")
        ),
    )
    trust_registry_key(registry.store.signer.public_key, os.environ)
    ws = workspace(tmp_path)
    with registry.client() as client:
        install(
            client, "acme/tracker", workspace_root=ws, trusted=trusted_registry_keys(os.environ)
        )
    write_connector(ws / "connectors" / "tracker", server.tracker.url)
    found = find_connectors(ws, environ=os.environ)
    assert found["tracker"].identity == "" and found["tracker"].origin.startswith(
        "http://127.0.0.1"
    )
    env = _run(ws, home)
    assert env.outcome == "completed", env.refusal  # type: ignore[attr-defined]
    assert server.tracker.hits == {"GET /api/issues/7": 1}


def test_the_cli_packages_publishes_installs_and_verifies_a_connector(
    registry: Registry,
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.registry.test_cli import _run as cli

    folder = write_connector(tmp_path / "tracker", "https://tracker.example.com")
    key_file = tmp_path / "acme.pem"
    key_file.write_bytes(registry.acme.private_pem())
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    monkeypatch.chdir(root)
    monkeypatch.setenv("PROCTOR_REGISTRY_URL", registry.url)
    code, out, _ = cli(["package", str(folder), "--json"], capsys)
    projected = json.loads(out)
    assert code == 0 and projected["kind"] == "connector" and projected["name"] == "tracker"
    assert sorted(projected["package"]["files"]) == ["README.md", "connector.yaml"]
    monkeypatch.setenv("PROCTOR_REGISTRY_TOKEN", registry.acme_token)
    argv = ["registry", "publish", str(folder), "--namespace", "acme", "--key", str(key_file)]
    code, out, err = cli([*argv, "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["manifest"]["kind"] == "connector"
    monkeypatch.delenv("PROCTOR_REGISTRY_TOKEN")
    assert cli(["registry", "trust", registry.store.signer.public_key.raw.hex()], capsys)[0] == 0
    pin = ["--digest", projected["content_digest"]]
    code, out, err = cli(["registry", "install", "acme/tracker", *pin, "--json"], capsys)
    assert code == 0, err
    done = json.loads(out)
    assert done["folder"] == f".proctor/added-connectors/acme/tracker/{projected['version']}"
    code, out, _ = cli(["registry", "verify", "acme/tracker"], capsys)
    assert code == 0 and out.startswith(f"verified acme/tracker@{projected['version']}")
    code, out, _ = cli(["connector", "list"], capsys)
    assert code == 0 and "tracker" in out
    (root / done["folder"] / "README.md").write_text("edited\n")
    code, out, _ = cli(["registry", "verify", "--json"], capsys)
    (row,) = json.loads(out)["packages"]
    assert code == 1 and (row["kind"], row["code"]) == ("connector", "package_modified")

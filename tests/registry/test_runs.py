"""Installed packages in runs: publish -> install -> a parent's ``skill: acme/x@1.0.0`` runs it
-> the receipt names it; an edited installed copy is refused and nothing runs."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import ProctorError
from proctor.receipts.model import parse_envelope
from proctor.receipts.signing import signer_from_seed
from proctor.registry.install import install, trust_registry_key, trusted_registry_keys
from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.engine.session import Session
from proctor.runtime.packages.manifest import sign_statement
from proctor.runtime.packages.package import package_folder
from proctor.runtime.records.receipts import ReceiptStore
from proctor.runtime.records.verify_folder import verify_receipt
from tests.registry.conftest import Registry

CHILD_MD = (
    "---\nname: stamp\ndescription: Writes a stamp file and echoes.\nversion: 1.0.0\n---\nx\n"
)
CHILD_RUN = """minimum_proctor: 0.1.0
methods:
  main:
    description: Stamp the workspace and say so.
    inputs: {type: object, properties: {word: {type: string}}, additionalProperties: false}
    steps:
      - id: stamp
        tool: fs.write
        inputs: {path: stamped.txt, content: "stamped\\n", create: true}
      - id: say
        tool: echo
        inputs: {text: $input.word}
    result_from: [say]
"""
PARENT_RUN = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: call
        skill: acme/stamp@1.0.0
        inputs: {word: hello}
"""
TURN_RUN = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: think
        agent:
          instructions: Use the stamp skill if it helps.
          context: {skills: [acme/stamp@1.0.0]}
          calls: {skills: [acme/stamp@1.0.0]}
          output: {type: object}
"""

_OPEN: list[Session] = []


@pytest.fixture(autouse=True)
def _close() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def _session(root: Path, home: Path) -> Session:
    ticks = itertools.count()
    start = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    s = Session(
        Workspace(root),
        environ={"PROCTOR_HOME": str(home)},
        clock=lambda: start + timedelta(milliseconds=next(ticks)),
        signer=signer_from_seed(bytes(range(32))),
    )
    _OPEN.append(s)
    return s


def _skill(folder: Path, md: str, run: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(md)
    (folder / "run.yaml").write_text(run)
    return folder


def _installed(registry: Registry, home: Path, tmp_path: Path) -> Path:
    """acme/stamp@1.0.0 published, the registry trusted, installed into a fresh workspace."""
    built = package_folder(_skill(tmp_path / "src" / "stamp", CHILD_MD, CHILD_RUN))
    statement = sign_statement(registry.acme, "acme/stamp", built.version, built.content_digest)
    with registry.client(registry.acme_token) as client:
        client.publish(statement, built)
    trust_registry_key(registry.store.signer.public_key, os.environ)
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    with registry.client() as client:
        install(client, "acme/stamp@1.0.0", workspace_root=root,
                trusted=trusted_registry_keys(os.environ))  # fmt: skip
    return root


def _body(root: Path, receipt_id: str | None) -> dict[str, Any]:
    data = ReceiptStore(root / ".proctor" / "receipts").get(receipt_id or "")
    return parse_envelope(data or b"").body


def _child_run_receipt(root: Path, parent_receipt: str | None) -> dict[str, Any]:
    step = _body(root, _body(root, parent_receipt)["children"][0]["receipt_id"])
    return _body(root, step["children"][-1]["receipt_id"])


def test_a_parent_runs_an_installed_package_and_its_receipt_names_it(
    registry: Registry, home: Path, tmp_path: Path
) -> None:
    root = _installed(registry, home, tmp_path)
    _skill(root / "skills" / "parent", CHILD_MD.replace("stamp", "parent"), PARENT_RUN)
    s = _session(root, home)
    env = s.run(str(root / "skills" / "parent"))
    assert env.outcome == "completed", env.refusal
    assert env.result == {"text": "hello"}
    assert (root / "stamped.txt").read_text() == "stamped\n"
    child = _child_run_receipt(root, env.receipt_id)
    signature = json.loads(
        (root / ".proctor/added-skills/acme/stamp/1.0.0/signature.json").read_bytes()
    )
    from proctor.receipts.canonical import digest

    assert child["package"] == {
        "source": "registry",
        "name": "acme/stamp",
        "version": "1.0.0",
        "content_digest": signature["content_digest"],
        "manifest_digest": digest(signature),
    }
    assert child["identity"] == "registry:acme/stamp"
    parent = _body(root, env.receipt_id)
    assert "package" not in parent  # the parent is a local folder
    assert parent["identity"] == "local:skills/parent"
    assert verify_receipt(env.receipt_id or "", receipts_dir=root / ".proctor" / "receipts",
                          public_key=s.signer.public_key).ok  # fmt: skip
    # and run directly by name: the run's own receipt binds it
    (root / "stamped.txt").unlink()
    direct = s.run("acme/stamp@1.0.0", inputs={"word": "hi"})
    assert direct.outcome == "completed" and direct.result == {"text": "hi"}, direct.refusal
    assert _body(root, direct.receipt_id)["package"]["name"] == "acme/stamp"


def test_an_edited_installed_package_is_refused_and_nothing_runs(
    registry: Registry, home: Path, tmp_path: Path
) -> None:
    root = _installed(registry, home, tmp_path)
    folder = root / ".proctor/added-skills/acme/stamp/1.0.0"
    run_yaml = folder / "run.yaml"
    run_yaml.write_text(run_yaml.read_text().replace("stamped.txt", "evil.txt"))
    _skill(root / "skills" / "parent", CHILD_MD.replace("stamp", "parent"), PARENT_RUN)
    s = _session(root, home)
    with pytest.raises(ProctorError) as parent:  # refused before the parent's run exists
        s.run(str(root / "skills" / "parent"))
    assert parent.value.code == "package_modified" and not s.store.list_runs()
    assert not (root / "evil.txt").exists() and not (root / "stamped.txt").exists()
    # one level down, the step that names it fails and the package never runs
    middle = PARENT_RUN.replace("skill: acme/stamp@1.0.0", "skill: ../parent").replace(
        "        inputs: {word: hello}\n", ""
    )
    _skill(root / "skills" / "outer", CHILD_MD.replace("stamp", "outer"), middle)
    outer = s.run(str(root / "skills" / "outer"))
    assert outer.outcome == "failed" and outer.refusal is not None, outer.refusal
    assert outer.refusal.code == "package_modified", outer.refusal
    assert not (root / "evil.txt").exists() and not (root / "stamped.txt").exists()
    with pytest.raises(ProctorError) as direct:
        s.run("acme/stamp@1.0.0", inputs={"word": "hi"})
    assert direct.value.code == "package_modified"
    assert not (root / "evil.txt").exists()
    # referenced by its path it is a local package: it runs, and its receipt binds no name
    local = s.run(str(folder), inputs={"word": "x"})
    assert local.outcome == "completed" and (root / "evil.txt").exists()
    assert "package" not in _body(root, local.receipt_id)


def test_an_untrusted_registry_key_or_a_missing_version_is_refused_before_a_run(
    registry: Registry, home: Path, tmp_path: Path
) -> None:
    root = _installed(registry, home, tmp_path)
    other_home = tmp_path / "other-home"
    other_home.mkdir()
    s = _session(root, other_home)  # a home that trusts no registry key
    with pytest.raises(ProctorError) as untrusted:
        s.run("acme/stamp@1.0.0", inputs={"word": "hi"})
    assert untrusted.value.code == "registry_untrusted"
    with pytest.raises(ProctorError) as missing:
        _session(root, home).run("acme/stamp@9.9.9", inputs={"word": "hi"})
    assert missing.value.code == "package_not_installed"
    assert not (root / "stamped.txt").exists()
    assert not _session(root, home).store.list_runs()


def test_context_and_calls_skills_resolve_installed_packages(
    registry: Registry, home: Path, tmp_path: Path
) -> None:
    import hashlib

    root = _installed(registry, home, tmp_path)
    _skill(root / "skills" / "turn", CHILD_MD.replace("stamp", "turn"), TURN_RUN)
    s = _session(root, home)
    env = s.run(str(root / "skills" / "turn"))
    assert env.status == "needs_agent"
    (turn,) = env.requests or []
    (context,) = turn["context"]
    md = (root / ".proctor/added-skills/acme/stamp/1.0.0/SKILL.md").read_bytes()
    assert context["skill"] == "acme/stamp@1.0.0"
    assert context["digest"] == "sha256:" + hashlib.sha256(md).hexdigest()
    called = s.turn_call(env.run_id or "", "think", "skill.stamp.main", {"word": "w"}, "c1")
    assert called.status == "completed", called.error
    assert (root / "stamped.txt").exists()


def test_a_resume_refuses_a_package_edited_while_the_run_waited(
    registry: Registry, home: Path, tmp_path: Path
) -> None:
    root = _installed(registry, home, tmp_path)
    s = _session(root, home)
    from proctor.core.authority import parse_authority

    env = s.run("acme/stamp@1.0.0", inputs={"word": "hi"},
                authority=parse_authority({"effects": "ask"}))  # fmt: skip
    assert env.status == "needs_approval"
    (request,) = env.requests or []
    md = root / ".proctor/added-skills/acme/stamp/1.0.0/SKILL.md"
    md.write_text(md.read_text() + "\nedited\n")
    answer = {"approvals": {"stamp": {"request_digest": request["request_digest"],
                                      "approved": True}}}  # fmt: skip
    with pytest.raises(ProctorError) as refused:
        s.resume(env.run_id or "", answer)
    assert refused.value.code == "package_changed"
    assert not (root / "stamped.txt").exists()
    # closed now, the run seals; its receipt binds no name, since the package no longer verifies
    closed = s.resume(env.run_id or "", {"close": {"outcome": "superseded"}})
    assert closed.outcome == "superseded" and "package" not in _body(root, closed.receipt_id)
    audit = (root / ".proctor" / "audit.jsonl").read_text()
    assert '"event":"package_unbound"' in audit.replace(" ", "") and "package_modified" in audit


def test_the_proctor_namespace_is_never_installed(
    registry: Registry, home: Path, tmp_path: Path
) -> None:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    trust_registry_key(registry.store.signer.public_key, os.environ)
    with registry.client() as client, pytest.raises(ProctorError) as refused:
        install(client, "proctor/receipt-audit@1.0.0", workspace_root=root,
                trusted=trusted_registry_keys(os.environ))  # fmt: skip
    assert refused.value.code == "namespace_reserved"
    assert not (root / ".proctor" / "added-skills").exists()

"""``artifact.open``: a run opens an artifact another run of its own tree admitted, from its
descriptor, once the stored bytes are checked whole; then ``artifact.read`` pages it. Attacks: a
descriptor from another tree (a reference grants nothing), a forged size or digest, bytes
changed in the store, an artifact holding a value delivered to the run or a credential's shape:
each is refused before the caller holds a claim, so its reads stay refused too."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from proctor.errors import RefusedCall
from proctor.runtime.boundary.sanitize import TaintSet
from proctor.runtime.records.runs import RunRecord
from proctor.runtime.tools.base import TAINT_EXTRA, ToolContext
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)
from tests.runtime.tools.test_fs_support import Env, call
from tests.runtime.tools.test_fs_support import env as env  # fixture re-export

ROOT, CHILD, STRANGER = "a" * 32, "b" * 32, "c" * 32


def _runs(env: Env) -> None:
    env.store.create_run(RunRecord(run_id=ROOT, skill="p", method="main"))
    env.store.create_run(RunRecord(run_id=CHILD, skill="c", method="main", data={"tree": ROOT}))
    env.store.create_run(RunRecord(run_id=STRANGER, skill="s", method="main"))


def _as(env: Env, run_id: str, **extras: Any) -> ToolContext:
    return ToolContext(env.ws, env.store, run_id, "call-1", extras=dict(extras))


def _stored(env: Env, value: Any) -> dict[str, Any]:
    _runs(env)
    return call(_as(env, ROOT), "artifact.store", {"value": value})


def _refused(ctx: ToolContext, name: str, args: dict[str, Any]) -> str:
    with pytest.raises(RefusedCall) as caught:
        call(ctx, name, args)
    return caught.value.code


def test_a_child_opens_and_reads_what_its_root_stored(env: Env) -> None:
    desc = _stored(env, {"report": "quarterly", "rows": [1, 2, 3]})
    child = _as(env, CHILD)
    assert _refused(child, "artifact.read", {"ref": desc["ref"]}) == "artifact_unknown"
    opened = call(child, "artifact.open", {"artifact": desc, "label": "report"})
    assert opened["label"] == "report"
    assert {k: opened[k] for k in desc} == desc
    page = call(child, "artifact.read", {"ref": desc["ref"], "encoding": "utf-8"})
    assert json.loads(page["data"]) == {"report": "quarterly", "rows": [1, 2, 3]}
    default = call(child, "artifact.open", {"artifact": desc})
    assert default["label"] == desc["source"]


def test_a_descriptor_from_another_tree_grants_nothing(env: Env) -> None:
    desc = _stored(env, {"private": "root-tree-only"})
    stranger = _as(env, STRANGER)
    assert _refused(stranger, "artifact.open", {"artifact": desc}) == "artifact_unknown"
    assert _refused(stranger, "artifact.read", {"ref": desc["ref"]}) == "artifact_unknown"


def test_a_forged_size_or_digest_is_refused(env: Env) -> None:
    desc = _stored(env, {"a": 1})
    child = _as(env, CHILD)
    bigger = dict(desc, size=desc["size"] + 1)
    assert _refused(child, "artifact.open", {"artifact": bigger}) == "artifact_size_mismatch"
    other = dict(desc, digest="sha256:" + "0" * 64)
    assert _refused(child, "artifact.open", {"artifact": other}) == "artifact_ref_invalid"
    assert _refused(child, "artifact.read", {"ref": desc["ref"]}) == "artifact_unknown"


def test_bytes_changed_in_the_store_are_refused(env: Env) -> None:
    desc = _stored(env, {"blob": os.urandom(64).hex()})
    blob = env.root / ".proctor" / "artifacts" / "blobs" / desc["digest"].split(":")[1]
    os.chmod(blob, 0o600)
    with blob.open("r+b") as handle:
        was = handle.read(1)
        handle.seek(0)
        handle.write(bytes([was[0] ^ 0xFF]))
    child = _as(env, CHILD)
    assert _refused(child, "artifact.open", {"artifact": desc}) == "artifact_tampered"
    assert _refused(child, "artifact.read", {"ref": desc["ref"]}) == "artifact_unknown"


def test_an_artifact_holding_a_delivered_value_is_refused(env: Env) -> None:
    secret = "delivered-token-0a1b2c3d4e"
    desc = _stored(env, {"note": "x" * 5000 + secret})
    child = _as(env, CHILD, **{TAINT_EXTRA: TaintSet([secret])})
    assert _refused(child, "artifact.open", {"artifact": desc}) == "artifact_secret"
    assert _refused(child, "artifact.read", {"ref": desc["ref"]}) == "artifact_unknown"


def test_an_artifact_holding_a_credential_shape_is_refused(env: Env) -> None:
    desc = _stored(env, {"config": "token = ghp_" + "A1b2C3d4E5" * 4})
    child = _as(env, CHILD)
    assert _refused(child, "artifact.open", {"artifact": desc}) == "artifact_secret"


@pytest.mark.parametrize(
    "artifact",
    [
        {"ref": "artifact:sha256:" + "0" * 64, "digest": "sha256:" + "0" * 64},  # no size
        {"ref": "../../etc/passwd", "digest": "sha256:" + "0" * 64, "size": 1},
        {"ref": "artifact:sha256:" + "0" * 64, "digest": "sha256:" + "0" * 64, "size": -1},
        {"ref": "artifact:sha256:" + "0" * 64, "digest": "x", "size": 1},
    ],
)
def test_malformed_descriptors_are_refused_by_the_schema(env: Env, artifact: Any) -> None:
    _runs(env)
    assert _refused(_as(env, CHILD), "artifact.open", {"artifact": artifact}) == "schema_invalid"


PARENT = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: keep
        tool: artifact.store
        inputs: {value: {greeting: hello from the parent}}
      - id: child
        skill: ../opener
        inputs: {artifact: $steps.keep}
    result_from: [child]
"""

OPENER = """minimum_proctor: 0.1.0
methods:
  main:
    inputs:
      type: object
      properties: {artifact: {type: object}}
      required: [artifact]
    steps:
      - id: open
        tool: artifact.open
        inputs: {artifact: $input.artifact, label: greeting}
      - id: read
        tool: artifact.read
        inputs: {ref: $steps.open.ref, encoding: utf-8}
    result_from: [open, read]
"""


def test_a_parent_hands_its_child_a_descriptor_through_a_run(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    make_skill(root, "parent", PARENT)
    make_skill(root, "opener", OPENER)
    env = session(root).run("parent", cwd=root)
    assert env.outcome == "completed", env.refusal
    assert env.result["open"]["label"] == "greeting"
    assert json.loads(env.result["read"]["data"]) == {"greeting": "hello from the parent"}
    # the same descriptor given to a run of its own tree is refused, and nothing comes back
    stray = session(root).run("opener", inputs={"artifact": env.result["open"]}, cwd=root)
    assert stray.refusal is not None and stray.refusal.code == "artifact_unknown"
    assert "hello from the parent" not in json.dumps(stray.to_json())

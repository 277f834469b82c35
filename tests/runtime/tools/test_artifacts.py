"""artifact.admit / read / store: content-addressed snapshots, pages checked against admission."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.errors import ProctorError, RefusedCall
from proctor.receipts.canonical import canonical
from proctor.runtime.records.artifacts import MAX_PAGE_BYTES, ArtifactStore
from proctor.runtime.tools.artifacts import STORE_EXTRA
from proctor.runtime.tools.base import ToolContext
from tests.runtime.driver_support import (
    close_sessions,  # noqa: F401 - the autouse fixture
    make_skill,
    make_workspace,
    session,
)
from tests.runtime.tools.test_fs_support import Env
from tests.runtime.tools.test_fs_support import env as env  # fixture re-export

MIB = 1024 * 1024


def _blobs(root: Path) -> list[str]:
    folder = root / ".proctor" / "artifacts" / "blobs"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def test_a_100_mib_file_read_back_page_by_page_has_the_same_digest(env: Env) -> None:
    path = env.root / "big.bin"
    with path.open("wb") as handle:  # sparse, with real data at a few places
        handle.truncate(100 * MIB)
        for at in (0, 7 * MIB + 123, 50 * MIB - 5, 100 * MIB - 4096):
            handle.seek(at)
            handle.write(os.urandom(4096))
    expected = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    desc = env.call("artifact.admit", {"path": "big.bin"})
    assert desc["schema"] == "proctor.artifact.v1"
    assert desc["digest"] == expected and desc["size"] == 100 * MIB
    assert desc["source"] == "big.bin" and str(env.root) not in str(desc)
    whole, offset, pages = hashlib.sha256(), 0, 0
    while True:
        page = env.call(
            "artifact.read", {"ref": desc["ref"], "offset": offset, "length": MAX_PAGE_BYTES}
        )
        data = base64.b64decode(page["data"])
        assert page["offset"] == offset and page["digest"] == expected
        assert page["range_digest"] == "sha256:" + hashlib.sha256(data).hexdigest()
        assert len(data) <= MAX_PAGE_BYTES
        whole.update(data)
        offset, pages = page["next_offset"], pages + 1
        if page["eof"]:
            break
    assert pages == 25 and offset == 100 * MIB
    assert "sha256:" + whole.hexdigest() == expected


def test_a_changed_stored_page_is_refused_and_the_snapshot_outlives_its_source(env: Env) -> None:
    env.write("data.bin", os.urandom(300_000))
    original = env.digest("data.bin")
    desc = env.call("artifact.admit", {"path": "data.bin"})
    env.write("data.bin", b"changed afterwards")  # the snapshot, not the file, is read
    page = env.call("artifact.read", {"ref": desc["ref"], "length": 300_000})
    assert "sha256:" + hashlib.sha256(base64.b64decode(page["data"])).hexdigest() == original
    blob = env.root / ".proctor" / "artifacts" / "blobs" / desc["digest"].split(":")[1]
    os.chmod(blob, 0o600)
    with blob.open("r+b") as handle:
        handle.seek(200_000)
        was = handle.read(1)
        handle.seek(200_000)
        handle.write(bytes([was[0] ^ 0xFF]))  # a byte that differs (random data: "X" may not)
    with pytest.raises(RefusedCall) as caught:
        env.call("artifact.read", {"ref": desc["ref"], "offset": 190_000, "length": 20_000})
    assert caught.value.code == "artifact_tampered"
    # a page the change does not touch still reads, checked block by block
    env.call("artifact.read", {"ref": desc["ref"], "offset": 0, "length": 65536})
    listing = blob.with_name(blob.name + ".blocks")
    os.chmod(listing, 0o600)
    listing.write_bytes(hashlib.sha256(b"forged").digest() * 5)
    with pytest.raises(RefusedCall) as caught:
        env.call("artifact.read", {"ref": desc["ref"], "offset": 0, "length": 10})
    assert caught.value.code == "artifact_tampered"


@pytest.mark.parametrize(
    ("rel", "data", "code"),
    [
        (".env", b"TOKEN=abc\n", "sensitive_path"),
        ("deploy/id_rsa", b"x", "sensitive_path"),
        ("../outside.txt", b"x", "path_outside_workspace"),
        (
            "notes.txt",
            b"a" * (3 * MIB) + b"\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbg==\n",
            "sensitive_path",
        ),
    ],
)
def test_sensitive_outside_and_key_holding_files_are_never_admitted(
    env: Env, rel: str, data: bytes, code: str
) -> None:
    target = env.root / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    with pytest.raises(RefusedCall) as caught:
        env.call("artifact.admit", {"path": rel})
    assert caught.value.code == code
    assert _blobs(env.root) == []


def test_a_reference_is_scoped_to_the_run_that_admitted_it(env: Env) -> None:
    env.write("a.txt", "hello")
    desc = env.call("artifact.admit", {"path": "a.txt"})
    other = ToolContext(workspace=env.ws, store=env.store, run_id="run-other", call_id="c")
    from tests.runtime.tools.test_fs_support import call

    with pytest.raises(RefusedCall) as caught:
        call(other, "artifact.read", {"ref": desc["ref"]})
    assert caught.value.code == "artifact_unknown"


def test_the_store_ceiling_is_enforced_before_anything_is_kept(env: Env) -> None:
    env.ctx.extras[STORE_EXTRA] = ArtifactStore(env.ws.private_dir("artifacts"), max_bytes=1000)
    env.write("small.txt", b"x" * 600)
    env.write("other.txt", b"y" * 600)
    env.write("large.txt", b"z" * 1001)
    env.call("artifact.admit", {"path": "small.txt"})
    env.call("artifact.admit", {"path": "small.txt"})  # the same bytes: deduplicated
    with pytest.raises(RefusedCall) as caught:
        env.call("artifact.admit", {"path": "other.txt"})
    assert caught.value.code == "artifact_store_full"
    with pytest.raises(RefusedCall) as caught:
        env.call("artifact.admit", {"path": "large.txt"})
    assert caught.value.code == "artifact_too_large"
    assert len([n for n in _blobs(env.root) if "." not in n]) == 1


def test_utf8_pages_end_on_character_boundaries(env: Env) -> None:
    text = "añ€😀" * 5000
    env.write("t.txt", text)
    desc = env.call("artifact.admit", {"path": "t.txt", "media_type": "text/plain"})
    parts, offset = [], 0
    while True:
        page = env.call(
            "artifact.read",
            {"ref": desc["ref"], "offset": offset, "length": 1001, "encoding": "utf-8"},
        )
        parts.append(page["data"])
        assert page["range_digest"] == "sha256:" + hashlib.sha256(page["data"].encode()).hexdigest()
        offset = page["next_offset"]
        if page["eof"]:
            break
    assert "".join(parts) == text and page["media_type"] == "text/plain"
    env.write("b.bin", b"\xff\xfe\x00")
    binary = env.call("artifact.admit", {"path": "b.bin"})
    with pytest.raises(RefusedCall) as caught:
        env.call("artifact.read", {"ref": binary["ref"], "encoding": "utf-8"})
    assert caught.value.code == "artifact_not_text"


def test_store_keeps_canonical_json(env: Env) -> None:
    value = {"b": [1, "é"], "a": None}
    desc = env.call("artifact.store", {"value": value})
    assert desc["media_type"] == "application/json" and desc["source"] == "json"
    page = env.call("artifact.read", {"ref": desc["ref"]})
    assert base64.b64decode(page["data"]) == canonical(value) and page["eof"]


@settings(max_examples=25, deadline=None)
@given(
    ref=st.one_of(st.text(max_size=80), st.just("artifact:sha256:" + "0" * 64)),
    offset=st.one_of(st.integers(-5, 2**60), st.text(max_size=3), st.none()),
    length=st.one_of(st.integers(-5, 2**30), st.floats(), st.none()),
)
def test_fuzzed_read_arguments_are_refused_cleanly(
    tmp_path_factory: pytest.TempPathFactory, ref: object, offset: object, length: object
) -> None:
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.records.sqlite import SQLiteRunStore
    from tests.runtime.tools.test_fs_support import call

    root = tmp_path_factory.mktemp("fz")
    store = SQLiteRunStore(root / "runs.sqlite")
    try:
        ctx = ToolContext(workspace=Workspace(root), store=store, run_id="r", call_id="c")
        args = {"ref": ref, "offset": offset, "length": length}
        with pytest.raises((ProctorError, Exception)) as caught:
            call(ctx, "artifact.read", {k: v for k, v in args.items() if v is not None})
        # schema refusals come from fastjsonschema in this helper; the handler's are ours
        assert isinstance(caught.value, ProctorError) or "JsonSchema" in type(caught.value).__name__
    finally:
        store.close()


def test_a_run_admitting_a_sensitive_file_is_blocked_and_keeps_nothing(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    (ws / ".env").write_text("API_TOKEN=supersecretvalue\n")
    make_skill(
        ws,
        "snap",
        """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: snap
        tool: artifact.admit
        inputs: {path: .env}
""",
    )
    env = session(ws).run("snap", cwd=ws)
    assert env.outcome == "blocked"
    assert env.refusal is not None and env.refusal.code == "sensitive_path"
    assert _blobs(ws) == []


def test_a_page_holding_a_credential_is_refused_even_cut_by_the_page_edge(env: Env) -> None:
    token = "sk-" + "abcdefghijklmnopqrstuvwx1234"
    text = "a" * 5000 + f'\nAPI_KEY = "{token}"\n' + "b" * 5000
    env.write("config.txt", text)
    desc = env.call("artifact.admit", {"path": "config.txt"})
    at = text.index(token) + 5  # a page that ends inside the token
    for args in ({"length": at}, {"offset": at, "length": 1000}, {"encoding": "utf-8"}):
        with pytest.raises(RefusedCall) as caught:
            env.call("artifact.read", {"ref": desc["ref"], **args})
        assert caught.value.code == "artifact_secret"
    clean = env.call("artifact.read", {"ref": desc["ref"], "length": 4000})
    assert base64.b64decode(clean["data"]) == b"a" * 4000


HALVES = """minimum_proctor: 0.1.0
credentials:
  api:
    provider: canary
    auth:
      api_key: {delivery: {env: CANARY_TOKEN}}
methods:
  main:
    inputs:
      type: object
      properties: {offset: {type: integer}, length: {type: integer}}
      required: [offset, length]
    steps:
      - id: write
        tool: command.execute
        credential: api
        inputs:
          argv: [PY, "-c", "import os; open('dump.txt', 'w').write(WRITE)"]
      - id: admit
        tool: artifact.admit
        inputs: {path: dump.txt}
      - id: page
        tool: artifact.read
        inputs: {ref: $steps.admit.ref, offset: $input.offset, length: $input.length}
"""


def test_a_delivered_credential_read_back_in_two_halves_is_refused_in_both(
    tmp_path: Path,
) -> None:
    """A step writes the credential it was given to a file; each of two pages that hold one half
    of it is refused artifact_secret (base64 would carry a half past the result's scrubbing, and
    the two halves joined are the value). A page away from it still reads."""
    import sys

    ws = make_workspace(tmp_path / "ws")
    write = "'x' * 3000 + os.environ['CANARY_TOKEN'] + 'y' * 3000"
    make_skill(ws, "halves", HALVES.replace("PY", sys.executable).replace("WRITE", write))
    secret = "canary-" + os.urandom(12).hex()
    cut = 3000 + len(secret) // 2
    pages = {"first": (2000, cut - 2000), "second": (cut, 2000)}
    for name, (offset, length) in pages.items():
        env = session(ws).run(
            "halves", inputs={"offset": offset, "length": length}, cwd=ws,
            request_secrets={"api": secret},
        )  # fmt: skip
        assert env.refusal is not None and env.refusal.code == "artifact_secret", (name, env)
        shown = str(env.to_json())
        for half in (secret[: len(secret) // 2], secret[len(secret) // 2 :]):
            assert half not in shown
            assert base64.b64encode(half.encode()).decode()[:8] not in shown
    stored = b"".join(
        p.read_bytes()
        for p in (ws / ".proctor").rglob("*")
        if p.is_file() and "blobs" not in p.parts  # the admitted snapshot itself holds it
    )
    assert secret[4:20].encode() not in stored  # no half in the run store, audit or receipts
    far = session(ws).run(
        "halves", inputs={"offset": 0, "length": 1000}, cwd=ws, request_secrets={"api": secret}
    )
    assert far.outcome == "completed", far.refusal
    page = far.result.get("page", far.result)
    assert base64.b64decode(page["data"]) == b"x" * 1000

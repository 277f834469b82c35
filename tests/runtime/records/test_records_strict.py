"""A witness's claim body, its own log, the forwarder's cursor and the syslog header are read
strictly: a key given twice is refused (nothing appended, nothing taken from it)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.errors import ConfigError, ParseError, StoreError
from proctor.receipts.canonical import canonical
from proctor.receipts.signing import signer_from_seed
from proctor.runtime.records.forward import (
    Forwarder,
    HttpSender,
    parse_destination,
    syslog_frame,
)
from proctor.runtime.records.witness import claim_of
from proctor.runtime.records.witness_server import WitnessLog

SIGNER = signer_from_seed(b"\x05" * 32)
HEAD = {"lines": 4, "last_digest": "sha256:" + "a" * 64}


def _claim_body(lines_first: int) -> bytes:
    """A claim signed over ``HEAD``, with ``audit_head.lines`` given first as
    ``lines_first``: a reader keeping the first copy reads another head than was signed."""
    doc = claim_of(SIGNER, "sha256:ws", "r1", "sha256:" + "b" * 64, HEAD)
    text = json.dumps(doc)
    return text.replace('"lines": 4', f'"lines": {lines_first}, "lines": 4', 1).encode()


def test_a_claim_body_with_a_key_twice_is_refused(tmp_path: Path) -> None:
    log = WitnessLog(tmp_path)
    with pytest.raises(ParseError) as caught:
        log.append_body(_claim_body(400))
    assert caught.value.code == "duplicate_key"
    assert not (tmp_path / "entries.jsonl").exists() and log.entries("sha256:ws") == []
    doc = claim_of(SIGNER, "sha256:ws", "r1", "sha256:" + "b" * 64, HEAD)
    assert log.append_body(canonical(doc))["seq"] == 1  # the same claim, once, is taken


def test_the_witness_answers_400_with_the_code_and_appends_nothing(tmp_path: Path) -> None:
    serve = ["witness", "serve", "--port", "0", "--dir", str(tmp_path)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctor", *serve],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PROCTOR_HOME": str(tmp_path / "home")},
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "the witness never said where it listens"
        url = proc.stdout.readline().split()[0]
        request = urllib.request.Request(url + "/v1/claims", data=_claim_body(400), method="POST")
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=10)
        assert caught.value.code == 400
        answer = json.loads(caught.value.read())
        caught.value.close()
        assert answer == {"error": "claim_invalid", "why": "duplicate_key"}
        assert not (tmp_path / "entries.jsonl").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_witness_log_with_a_key_twice_does_not_serve(tmp_path: Path) -> None:
    log = WitnessLog(tmp_path)
    log.append(claim_of(SIGNER, "sha256:ws", "r1", "sha256:" + "b" * 64, HEAD))
    path = tmp_path / "entries.jsonl"
    line = path.read_bytes().rstrip(b"\n")
    path.write_bytes(line.replace(b'"seq":1', b'"seq":7,"seq":1', 1) + b"\n")
    with pytest.raises(ConfigError) as caught:
        WitnessLog(tmp_path)
    assert caught.value.code == "witness_log_invalid"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
def test_any_claim_body_is_taken_or_refused_with_a_code(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        log = WitnessLog(Path(folder))
        with pytest.raises((ParseError, ValueError, ConfigError, KeyError, TypeError)):
            log.append_body(data)
        assert log.entries("") == [] and not (Path(folder) / "entries.jsonl").exists()


def test_a_cursor_with_a_key_twice_is_refused(tmp_path: Path) -> None:
    destination = parse_destination("http://127.0.0.1:9/x")
    sender = HttpSender(destination.url)
    try:
        forwarder = Forwarder(tmp_path / "audit.jsonl", tmp_path, destination, sender)
        forwarder.folder.mkdir()
        good = {
            "schema": "proctor.audit_forward_cursor.v1",
            "lines": 0,
            "offset": 0,
            "last_digest": "",
        }
        text = json.dumps(good)
        # a reader keeping the first copy resumes after line 900; this one from the start
        forwarder.path.write_text(text.replace('"lines": 0', '"lines": 900, "lines": 0', 1))
        with pytest.raises(StoreError) as caught:
            forwarder.cursor()
        assert caught.value.code == "forward_cursor_invalid"
        assert "duplicate_key" in caught.value.message
    finally:
        sender.close()


def test_the_syslog_header_of_a_line_with_an_event_twice_names_no_event() -> None:
    line = b'{"timestamp":"2026-01-01T00:00:00Z","event":"call_refused","event":"tool_call"}'
    frame = syslog_frame(line + b"\n", 3, "host")
    header = frame.partition(b"\xef\xbb\xbf")[0]
    assert b"tool_call" not in header and b"call_refused" not in header
    assert frame.endswith(line)  # the line itself is shipped as it is

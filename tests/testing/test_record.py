"""``proctor test record``: a real run (real HTTP on loopback, a person answering) becomes a
test file that replays green, with delivered credentials replaced by fixture placeholders."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from proctor.errors import UsageError
from proctor.parser.testfile import parse_test_file
from proctor.testing.record import RecordingPool, record_test
from proctor.testing.runner import collect, run_case
from tests.testing.support import FETCH, package, workspace

STEPS = """
minimum_proctor: 0.1.0
methods:
  fetch:
    description: Fetch a URL twice around a person's approval.
    inputs:
      type: object
      properties: {url: {type: string}}
      required: [url]
    steps:
      - id: first
        tool: http.request
        inputs: {method: GET, url: $input.url}
      - id: confirm
        ask: {reason: Send the report?}
      - id: send
        tool: http.request
        inputs: {method: POST, url: $input.url, json: {seen: $steps.first.body}}
    result_from: [first, send]
"""


class _Script:
    def __init__(self, confirms: list[bool]) -> None:
        self.confirms = confirms
        self.shown: list[str] = []

    def confirm(self, text: str) -> bool:
        return self.confirms.pop(0)

    def text(self, text: str) -> str:
        raise AssertionError(f"not asked in this test: {text}")

    def show(self, text: str) -> None:
        self.shown.append(text)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self._reply(b"the forecast")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self._reply(b"got " + self.rfile.read(length))

    def _reply(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(body)))
        self.send_header("set-cookie", "session=must-not-be-recorded")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[int]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_a_recorded_run_replays_green(tmp_path: Path, server: int) -> None:
    root = workspace(tmp_path / "ws")
    (root / "proctor.toml").write_text('[egress]\nallow = ["127.0.0.1"]\n')
    folder = package(root, "reporter", STEPS, {})
    out = folder / "tests" / "recorded.yaml"
    environ = {"PROCTOR_HOME": str(tmp_path / "home")}
    written = record_test(
        "skills/reporter#fetch", inputs=None, cli_inputs=[f"url=http://127.0.0.1:{server}/r"],
        out=out, cwd=root, prompter=_Script([True]), environ=environ,
    )  # fmt: skip
    assert written.path == out
    text = out.read_text()
    assert "set-cookie" not in text and "must-not-be-recorded" not in text
    test = parse_test_file(text, "recorded.yaml")
    assert test.host.approvals == {"confirm": True}
    assert [e.request.method for e in test.providers.http] == ["GET", "POST"]
    assert "proctor.toml" not in test.setup.files
    assert test.setup.egress == ["127.0.0.1/32"]  # the run's allow-list, checked in the replay
    assert test.expect.status == "sealed" and test.expect.receipt == "verified"
    (case,) = collect(out)
    result = run_case(case)
    assert result.status == "passed", [f.to_json() for f in result.failures]
    with pytest.raises(UsageError) as refused:
        record_test("skills/reporter#fetch", inputs=None, cli_inputs=[], out=out, cwd=root)
    assert refused.value.code == "record_out_exists"


def test_delivered_credentials_become_fixture_placeholders(tmp_path: Path) -> None:
    from proctor.runtime.skills import load_skill
    from proctor.testing.record import _test_document

    secret = "real-token-7c1e9d0b44aa"
    pool = RecordingPool()

    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="you sent " + request.headers["authorization"])

    from proctor.testing.record import _Recording

    # the recording wrapper the pool builds, around a mock server instead of a real pool
    recording = _Recording(httpx.MockTransport(echo), pool)
    request = httpx.Request("GET", "https://svc.example.com/me",
                            headers={"authorization": f"Bearer {secret}"})  # fmt: skip
    assert secret in recording.handle_request(request).text
    root = workspace(tmp_path / "ws")
    folder = package(root, "fetcher", FETCH.format(audience="https://svc.example.com"), {})
    skill = load_skill(str(folder), cwd=root, workspace_root=root)
    assert skill.package.profile is not None
    method = skill.package.profile.methods["fetch"]
    env = {"status": "sealed", "outcome": "completed", "result": {"body": f"you sent {secret}"},
           "receipt_id": "sha256:" + "0" * 64}  # fmt: skip
    doc = _test_document("fetch", {"url": "https://svc.example.com/me"}, skill, method, env,
                         pool, {"answers": {}, "approvals": {}})  # fmt: skip
    assert secret not in repr(doc)
    assert doc["setup"] == {"credentials": {"svc": "fixture-svc-credential"}}
    body = doc["providers"]["http"][0]["response"]["body"]
    assert body == "you sent fixture-svc-credential"


def test_record_refuses_an_out_path_outside_tests(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    package(root, "reporter", STEPS, {})
    with pytest.raises(UsageError) as refused:
        record_test("skills/reporter", inputs=None, cli_inputs=[], out=root / "x.yaml", cwd=root)
    assert refused.value.code == "record_out_invalid"


def test_files_the_run_read_are_staged_so_the_replay_reads_them_too(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    root = workspace(tmp_path / "ws")
    shutil.copytree(repo / "examples" / "notes-editor", root / "skills" / "notes-editor",
                    ignore=shutil.ignore_patterns("tests", "fixtures"))  # fmt: skip
    (root / "n.md").write_text("alpha beta\n")
    out = root / "skills" / "notes-editor" / "tests" / "edit.yaml"
    record_test(
        "skills/notes-editor#edit", inputs=None, cli_inputs=["file=n.md", "old=beta", "new=gamma"],
        out=out, cwd=root, prompter=_Script([]), environ={"PROCTOR_HOME": str(tmp_path / "h")},
    )  # fmt: skip
    assert (root / "n.md").read_text() == "alpha gamma\n"  # the recording was a real run
    test = parse_test_file(out.read_text(), "edit.yaml")
    assert test.setup.files == {"n.md": "alpha beta\n"}
    (case,) = collect(out)
    result = run_case(case)
    assert result.status == "passed", [f.to_json() for f in result.failures]


ACTING = """
minimum_proctor: 0.1.0
methods:
  say:
    description: Say who the run acts for.
    steps:
      - id: say
        tool: echo
        inputs: {text: $run.act.for}
"""


def test_the_act_a_recording_states_is_kept_as_host_act(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    package(root, "acting", ACTING, {})
    out = root / "skills" / "acting" / "tests" / "say.yaml"
    record_test(
        "skills/acting#say", inputs=None, cli_inputs=[], out=out, cwd=root, prompter=_Script([]),
        environ={"PROCTOR_HOME": str(tmp_path / "h")}, act={"for": "recorder"},
    )  # fmt: skip
    test = parse_test_file(out.read_text(), "say.yaml")
    assert test.host.act == {"for": "recorder"}
    assert test.expect.output is not None and test.expect.output.value == {"text": "recorder"}
    (case,) = collect(out)
    result = run_case(case)
    assert result.status == "passed", [f.to_json() for f in result.failures]

"""``proctor test`` as a user runs it: exit codes, the proctor.test.v1 report, JUnit XML, and
no fixture secret in any of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema

from proctor.contracts.testreport import suite_report_schema
from tests.testing.support import ECHO, FETCH, package, workspace

SECRET = "fixture-secret-3f9a1c7e5b2d"

PASSING = """
method: say
inputs: {text: hi}
expect: {status: sealed, outcome: completed}
"""

FAILING = """
method: say
inputs: {text: hi}
expect: {status: sealed, outcome: failed}
"""

# The service echoes the credential back; the run scrubs it from the result, and the test
# (wrongly) expects to see it: its expected side holds the secret, its actual side the marker.
LEAKY = f"""
method: fetch
inputs: {{url: "https://svc.example.com/me"}}
setup:
  credentials: {{svc: {SECRET}}}
providers:
  http:
    - request: {{method: GET, url: "https://svc.example.com/me"}}
      response: {{status: 200, body: "you are {SECRET}"}}
expect:
  status: sealed
  output: {{subset: {{body: "you are {SECRET}"}}}}
"""


def _proctor(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    return subprocess.run(
        [sys.executable, "-m", "proctor", "test", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_exit_codes_and_the_report(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    package(root, "echoer", ECHO, {"a-pass": PASSING, "b-fail": FAILING})
    ok = _proctor(root, "skills/echoer", "-k", "a-pass", "--json")
    assert ok.returncode == 0, ok.stderr
    failed = _proctor(root, "skills/echoer", "--json", "--junit", "out.xml")
    assert failed.returncode == 5, failed.stderr
    report = json.loads(failed.stdout)
    jsonschema.validate(report, suite_report_schema())
    assert report["schema"] == "proctor.test.v1"
    assert [(t["id"], t["status"]) for t in report["tests"]] == [
        ("echoer/a-pass", "passed"),
        ("echoer/b-fail", "failed"),
    ]
    ran = report["tests"][0]["authority"]  # what the test ran under, named in the report
    assert ran["guard_modules"] == [] and ran["http"] == [] and ran["egress"] == []
    assert ran["policies"] and all(p.startswith("proctor:") for p in ran["policies"])
    failure = report["tests"][1]["failures"][0]
    assert failure == {
        "check": "outcome",
        "message": "the run's outcome is completed",
        "pointer": "/outcome",
        "expected": "failed",
        "actual": "completed",
    }
    suite = ET.parse(root / "out.xml").getroot()
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    (case,) = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert case.get("name") == "b-fail"
    (prop,) = case.iter("property")
    assert prop.get("name") == "authority" and "no package guard module" in str(prop.get("value"))
    nothing = _proctor(root, "skills/missing")
    assert nothing.returncode == 2
    assert "test_path_invalid" in nothing.stderr


def test_a_setup_secret_never_appears_in_the_report_or_junit(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    package(root, "fetcher", FETCH.format(audience="https://svc.example.com"), {"leak": LEAKY})
    as_json = _proctor(root, "skills/fetcher", "--json", "--junit", "out.xml", "--keep")
    people = _proctor(root, "skills/fetcher")
    assert as_json.returncode == people.returncode == 5
    report = json.loads(as_json.stdout)
    (failure,) = report["tests"][0]["failures"]
    assert failure["expected"] == "you are [REDACTED:tainted]"  # the check still shows where
    junit = (root / "out.xml").read_bytes()
    kept = Path(report["tests"][0]["workspace"])
    records = [p.read_bytes() for p in (kept / ".proctor").rglob("*") if p.is_file()]
    for text in [as_json.stdout, as_json.stderr, people.stdout, people.stderr]:
        assert SECRET not in text
    for data in [junit, *records]:
        assert SECRET.encode() not in data


def test_a_junit_file_that_cannot_be_written_is_refused_after_the_report(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    package(root, "echoer", ECHO, {"a-pass": PASSING})
    done = _proctor(root, "skills/echoer", "--json", "--junit", "no-such-folder/out.xml")
    assert "Traceback" not in done.stderr
    assert done.returncode == 2 and "error[junit_unwritable]" in done.stderr
    assert "no-such-folder/out.xml" in done.stderr
    report, end = json.JSONDecoder().raw_decode(done.stdout)
    assert report["summary"]["passed"] == 1  # the report was still printed, then the error
    assert json.loads(done.stdout[end:])["code"] == "junit_unwritable"


def test_help_names_the_usage(tmp_path: Path) -> None:
    shown = _proctor(tmp_path, "--help")
    assert shown.returncode == 0
    assert "PATH [-k NAME]" in shown.stdout
    assert "record" in shown.stdout

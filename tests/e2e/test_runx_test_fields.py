"""A package whose tests use the runx reference's test fields as it writes them (``host.act``,
``providers.processes`` with ``input:``, ``package: fixtures/<dir>``,
``expect.http_request_counts``), run by ``proctor test`` as a user runs it: every test passes,
the report validates, and a test naming a fixture package through a link errs with its code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema

from proctor.contracts.testreport import suite_report_schema
from tests.testing.support import SKILL_MD, package, workspace

RUN_YAML = """
minimum_proctor: 0.1.0
methods:
  release:
    description: Read the version, tag it for whoever the host acts for, and announce it.
    steps:
      - id: version
        tool: command.execute
        inputs: {argv: [git, describe, --tags]}
      - id: owner
        tool: echo
        inputs: {text: $run.act.owner}
      - id: announce
        tool: http.request
        inputs:
          method: POST
          url: https://hooks.example.com/releases
          json: {version: $steps.version.stdout, owner: $steps.owner.text}
      - id: check
        tool: http.request
        inputs: {method: GET, url: https://hooks.example.com/releases}
    result_from: [owner, announce]
"""

RELEASE = """
method: release
host:
  act: {owner: release-team}
providers:
  processes:
    - tool: command.execute
      input: {argv: [git, describe, --tags]}
      result: {exit_code: 0, stdout: "v1.2.0", stderr: "", stdout_digest: "sha256:x",
               stderr_digest: "sha256:y"}
  http:
    - request:
        method: POST
        url: https://hooks.example.com/releases
        body: {json: {version: v1.2.0, owner: release-team}}
      response: {status: 201, body: created}
    - request: {method: GET, url: https://hooks.example.com/releases, body: none}
      response: {status: 200, body: "[v1.2.0]"}
expect:
  status: sealed
  outcome: completed
  output: {subset: {owner: {text: release-team}, announce: {status: 201}}}
  step_outputs: {version: {subset: {stdout: v1.2.0}}}
  http_request_counts: [1, 1]
  receipt: {schema: runx.receipt.v1}
"""

COMPOSED = """
package: fixtures/pipeline
host:
  act: {owner: pipeline}
providers:
  processes:
    - tool: command.execute
      input: {argv: [git, describe, --tags]}
      result: {exit_code: 0, stdout: "v2.0.0", stdout_digest: "sha256:x", stderr_digest: "sha256:y"}
  http:
    - request:
        method: POST
        url: https://hooks.example.com/releases
        body: {json: {version: v2.0.0, owner: pipeline}}
      response: {status: 201}
    - request: {method: GET, url: https://hooks.example.com/releases}
      response: {status: 200}
expect:
  status: sealed
  outcome: completed
  step_outputs: {ship: {subset: {owner: {text: pipeline}}}}
"""

PIPELINE = """
minimum_proctor: 0.1.0
methods:
  main:
    description: Run the release of the package under test.
    steps:
      - id: ship
        skill: releaser#release
        inputs: {}
"""


def _proctor(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    return subprocess.run(
        [sys.executable, "-m", "proctor", "test", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_runx_fields_pass_under_proctor_test(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    folder = package(root, "releaser", RUN_YAML, {"a-release": RELEASE, "b-composed": COMPOSED})
    pipeline = folder / "fixtures" / "pipeline"
    pipeline.mkdir(parents=True)
    (pipeline / "SKILL.md").write_text(SKILL_MD.format(name="pipeline"))
    (pipeline / "run.yaml").write_text(PIPELINE.lstrip())
    done = _proctor(root, "skills/releaser", "--json")
    report = json.loads(done.stdout)
    jsonschema.validate(report, suite_report_schema())
    assert done.returncode == 0, json.dumps(report["tests"], indent=1)
    assert [t["status"] for t in report["tests"]] == ["passed", "passed"]


def test_a_linked_fixture_package_errs_with_its_code(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    folder = package(root, "releaser", RUN_YAML, {"b-composed": COMPOSED})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "SKILL.md").write_text(SKILL_MD.format(name="pipeline"))
    (outside / "run.yaml").write_text(PIPELINE.lstrip())
    (folder / "fixtures").mkdir()
    os.symlink(outside, folder / "fixtures" / "pipeline")
    done = _proctor(root, "skills/releaser", "--json")
    (test,) = json.loads(done.stdout)["tests"]
    assert done.returncode == 5
    assert test["status"] == "error" and test["error"]["code"] == "test_package_invalid"

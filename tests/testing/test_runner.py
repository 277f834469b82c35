"""Finding tests, staging their workspace, and the errors of a test that cannot run."""

from __future__ import annotations

from pathlib import Path

import pytest

from proctor.errors import UsageError
from proctor.testing.runner import collect, run_case
from tests.receipt_files import stored
from tests.testing.support import ECHO, FETCH, package, run_one, workspace

PASS = "method: say\ninputs: {text: hi}\nexpect: {status: sealed, outcome: completed}\n"


def test_collect_a_file_a_package_and_a_folder(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    one = package(root, "one", ECHO, {"b": PASS, "a": PASS})
    package(root, "two", ECHO, {"c": PASS})
    (root / "skills" / "no-tests").mkdir()
    (root / "skills" / "no-tests" / "SKILL.md").write_text("---\nname: x\ndescription: y\n---\n")
    assert [c.name for c in collect(one)] == ["a", "b"]
    assert [c.name for c in collect(one / "tests" / "b.yaml")] == ["b"]
    assert [(c.package_label, c.name) for c in collect(root)] == [
        ("one", "a"), ("one", "b"), ("two", "c"),
    ]  # fmt: skip
    assert [c.name for c in collect(root, "two/")] == ["c"]
    for path, code in [
        (root / "nothing", "test_path_invalid"),
        (one / "run.yaml", "test_path_invalid"),
        (root / "skills" / "no-tests", "no_tests"),
    ]:
        with pytest.raises(UsageError) as refused:
            collect(path)
        assert refused.value.code == code
    with pytest.raises(UsageError):
        collect(root, "no-such-test")


def test_fixtures_are_staged_whole_and_setup_files_over_them(tmp_path: Path) -> None:
    text = """
method: say
inputs: {text: hi, path: notes/new.txt}
setup:
  files: {notes/b.txt: from setup}
expect:
  status: sealed
  outcome: completed
  files:
    notes/a.txt: {content: from fixtures}
    notes/b.txt: {content: from setup}
    notes/new.txt: {content: hi}
"""
    fixtures = {"notes/a.txt": "from fixtures", "notes/b.txt": "replaced"}
    folder = package(workspace(tmp_path / "ws"), "echoer", ECHO, {"t": text}, fixtures)
    result = run_one(folder, "t")
    assert result.status == "passed", [f.to_json() for f in result.failures]
    # the package's own fixtures are untouched by the run
    assert (folder / "fixtures" / "notes" / "b.txt").read_text() == "replaced"


def test_fixtures_stage_a_composites_child_beside_the_package_never_over_it(
    tmp_path: Path,
) -> None:
    composite = """
minimum_proctor: 0.1.0
methods:
  go:
    description: Call the child.
    steps:
      - id: each
        skill: ../child
        inputs: {text: hi}
"""
    child_run = "minimum_proctor: 0.1.0\nmethods:\n  echo:\n    description: Echo.\n"
    child_run += "    inputs: {type: object, properties: {text: {type: string}}}\n"
    child_run += "    steps:\n      - {id: say, tool: echo, inputs: {text: $input.text}}\n"
    fixtures = {
        "skills/child/SKILL.md": "---\nname: child\ndescription: A child.\n---\nEcho.\n",
        "skills/child/run.yaml": child_run,
    }
    text = "expect: {status: sealed, outcome: completed, steps: {each: completed}}\n"
    folder = package(workspace(tmp_path / "ws"), "parent", composite, {"t": text}, fixtures)
    result = run_one(folder, "t")
    assert result.status == "passed", [f.to_json() for f in result.failures]
    # a fixture over the package under test itself is refused, and the package is untouched
    (folder / "fixtures" / "skills" / "parent").mkdir()
    (folder / "fixtures" / "skills" / "parent" / "run.yaml").write_text("hijacked")
    refused = run_one(folder, "t")
    assert refused.status == "error"
    assert refused.error is not None and refused.error["code"] == "test_fixture_refused"
    assert (folder / "run.yaml").read_text().startswith("minimum_proctor")


@pytest.mark.parametrize(
    "rel", ["../escape.txt", ".proctor/audit.jsonl", "skills/echoer/run.yaml", "/abs.txt", "a/../b"]
)
def test_setup_files_stay_inside_the_workspace(tmp_path: Path, rel: str) -> None:
    text = f"method: say\ninputs: {{text: hi}}\nsetup:\n  files: {{'{rel}': x}}\n"
    text += "expect: {status: sealed}\n"
    folder = package(workspace(tmp_path / "ws"), "echoer", ECHO, {"t": text})
    result = run_one(folder, "t")
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "test_fixture_refused"
    assert not (tmp_path / "ws" / ".proctor" / "test" / "escape.txt").exists()
    assert (folder / "run.yaml").read_text().startswith("minimum_proctor")


def test_setup_credentials_name_declared_providers(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    run_yaml = FETCH.format(audience="https://svc.example.com")
    text = """
method: fetch
inputs: {url: "https://svc.example.com/"}
setup: {credentials: {other: x}}
expect: {status: sealed}
"""
    result = run_one(package(root, "fetcher", run_yaml, {"t": text}), "t")
    assert result.error is not None and result.error["code"] == "test_credential_unknown"
    modes = text.replace("{other: x}", "{svc: {oauth: long-enough-value}}")
    result = run_one(package(root, "fetcher", run_yaml, {"t": modes}), "t")
    assert result.error is not None and result.error["code"] == "test_credential_unknown"
    short = text.replace("{other: x}", "{svc: abc}")
    result = run_one(package(root, "fetcher", run_yaml, {"t": short}), "t")
    assert result.error is not None and result.error["code"] == "test_credential_too_short"


def test_a_test_file_that_does_not_parse_is_an_error_with_its_position(tmp_path: Path) -> None:
    folder = package(workspace(tmp_path / "ws"), "echoer", ECHO, {"t": "expect: {statsu: x}\n"})
    result = run_one(folder, "t")
    assert result.status == "error"
    assert result.error is not None and result.error["code"] == "test_unknown_field"
    assert ":1:10: unknown field expect.statsu" in result.error["message"]


def test_seeded_receipts_are_verified_under_the_test_key(tmp_path: Path) -> None:
    root = workspace(tmp_path / "ws")
    source = package(root, "echoer", ECHO, {"t": PASS})
    made = run_one(source, "t", keep=True)
    assert made.workspace is not None and made.receipt_id is not None
    hex_id = made.receipt_id.removeprefix("sha256:")
    made_receipts = stored(made.workspace / ".proctor" / "receipts")
    seeded = PASS.replace("expect:", f"setup: {{receipts: [fixtures/seed/{hex_id}.json]}}\nexpect:")
    folder = package(root, "seeder", ECHO, {"t": seeded})
    (folder / "fixtures" / "seed").mkdir(parents=True)
    for rid, data in made_receipts.items():  # exported as files, one per receipt
        (folder / "fixtures" / "seed" / f"{rid[7:]}.json").write_bytes(data)
    result = run_one(folder, "t", keep=True)
    assert result.status == "passed", (result.error, result.failures)
    assert result.workspace is not None
    store = result.workspace / ".proctor" / "receipts"
    assert stored(store)[made.receipt_id] == made_receipts[made.receipt_id]
    # a receipt whose bytes changed does not verify and is refused
    tampered = folder / "fixtures" / "seed" / f"{hex_id}.json"
    tampered.write_bytes(tampered.read_bytes().replace(b"completed", b"completed "))
    refused = run_one(folder, "t")
    assert refused.error is not None and refused.error["code"] == "test_receipt_invalid"


def test_a_case_runs_from_any_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = package(workspace(tmp_path / "ws"), "echoer", ECHO, {"t": PASS})
    monkeypatch.chdir(tmp_path)
    (case,) = collect(folder)
    assert run_case(case).status == "passed"

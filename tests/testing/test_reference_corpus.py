"""The reference corpus: every runx and auro example of the reference documents, as a fixture
under ``tests/assets/reference/``, read and run by proctor as a user of either system would
bring it, with the outcome ``expected.toml`` states for it.

A fixture's kind follows from its name and contents:

- a folder with ``run.yaml``: a skill package; every test under its ``tests/`` runs under
  ``proctor test``'s runner: ``runs`` when all pass, else the first error's code (a package
  that does not parse is such an error) or ``failed:<check>`` for a failed check;
- a folder with ``directives/``: each directive file through the directive parser (``parses``);
- a folder with ``proctor.toml``: its guard modules loaded as a workspace's are (``parses``);
- ``*.resume.json``: a resume document; ``*.env``: a workspace ``.env``;
- ``*.envelope.json`` and ``*.audit.jsonl``: output formats of the references, compared with
  proctor's own (``parses`` when proctor's shape holds it, ``differs`` when not).
"""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from proctor.errors import ProctorError

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "reference"
TABLE: dict[str, str] = tomllib.loads((ASSETS / "expected.toml").read_text(encoding="utf-8"))
NOT_FIXTURES = {"README.md", "expected.toml"}
FIXTURES = sorted(p.name for p in ASSETS.iterdir() if p.name not in NOT_FIXTURES)


def test_the_table_names_every_fixture_once() -> None:
    assert sorted(TABLE) == FIXTURES
    readme = (ASSETS / "README.md").read_text(encoding="utf-8")
    for name in FIXTURES:
        assert f"`{name}`" in readme, f"README.md does not say where {name} came from"


def _package(folder: Path, tmp: Path) -> str:
    from proctor.testing.runner import collect, run_cases

    root = tmp / "ws"
    (root / ".proctor").mkdir(parents=True)
    package = root / "skills" / folder.name.split("_", 1)[1]
    shutil.copytree(folder, package)
    results = run_cases(collect(package))
    for result in results:
        if result.status == "error":
            assert result.error is not None
            return str(result.error["code"])
        if result.status == "failed":
            return "failed:" + result.failures[0].check
    return "runs"


def _directives(folder: Path) -> str:
    from proctor.parser.directive import parse_directive

    for file in sorted((folder / "directives").glob("*.md")):
        try:
            parse_directive(file.read_text(encoding="utf-8"), file_stem=file.stem, source=file.name)
        except ProctorError as exc:
            return exc.code
    return "parses"


def _guards(folder: Path, tmp: Path) -> str:
    from proctor.policy.guard_files import read_guard_files
    from proctor.policy.registry import GuardRegistry
    from proctor.policy.user_guards import load_user_guards, trusting

    root = tmp / "ws"
    shutil.copytree(folder, root)
    files = read_guard_files(root)
    try:
        load_user_guards(files, GuardRegistry.with_shipped(), trust=trusting(files.digest))
    except ProctorError as exc:
        return exc.code
    return "parses"


def _resume(file: Path) -> str:
    from proctor.contracts.resume import parse_resume_document

    try:
        parse_resume_document(file.read_bytes())
    except ProctorError as exc:
        return exc.code
    return "parses"


def _dotenv(file: Path, tmp: Path) -> str:
    from dotenv import dotenv_values

    from proctor.runtime.home.credentials.environment import snapshot_environment

    (tmp / ".env").write_bytes(file.read_bytes())
    snapshot = snapshot_environment(tmp, environ={})
    declared = {k: v for k, v in dotenv_values(file, interpolate=False).items() if v is not None}
    assert declared, "the fixture names no variable"
    for name, value in declared.items():
        assert snapshot.get(name) == value and snapshot.origins[name] == "dotenv"
    return "parses"


def _envelope(file: Path) -> str:
    import jsonschema

    from proctor.contracts.envelope import run_envelope_schema

    errors = list(jsonschema.Draft202012Validator(run_envelope_schema()).iter_errors(
        json.loads(file.read_bytes())
    ))  # fmt: skip
    return "parses" if not errors else "differs"


def _audit(file: Path, tmp: Path) -> str:
    from proctor.runtime.records.audit import AuditLog

    with AuditLog(tmp / "audit.jsonl") as log:
        log.emit("policy_guard_check", run_id="r1", step_index=0, tool="fs.read")
    ours = list(json.loads((tmp / "audit.jsonl").read_bytes().splitlines()[0]))
    head = ours[: ours.index("redacted_fields") + 1]
    for line in file.read_bytes().splitlines():
        theirs = list(json.loads(line))
        if theirs[: len(head)] != head:
            return "differs"
    return "parses"


def outcome(name: str, tmp: Path) -> str:
    """What proctor does with the fixture ``name``, in the table's words."""
    path = ASSETS / name
    if path.is_dir():
        if (path / "run.yaml").is_file():
            return _package(path, tmp)
        if (path / "directives").is_dir():
            return _directives(path)
        if (path / "proctor.toml").is_file():
            return _guards(path, tmp)
    elif name.endswith(".resume.json"):
        return _resume(path)
    elif name.endswith(".env"):
        return _dotenv(path, tmp)
    elif name.endswith(".envelope.json"):
        return _envelope(path)
    elif name.endswith(".audit.jsonl"):
        return _audit(path, tmp)
    raise AssertionError(f"{name}: no kind of fixture this test reads")


@pytest.mark.parametrize("name", FIXTURES)
def test_each_fixture_has_its_expected_outcome(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in [k for k in __import__("os").environ if k.startswith("PROCTOR_")]:
        if key != "PROCTOR_REQUIRE_SANDBOX":
            monkeypatch.delenv(key)
    monkeypatch.setenv("PROCTOR_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert outcome(name, tmp_path) == TABLE[name]


def test_the_reference_resume_document_parses_once_its_digests_are_real() -> None:
    # The reference elides its digests (sha256:…), which is what refuses it; the document's
    # shape (answers, approvals, a retry's value) is read as printed.
    from proctor.contracts.resume import parse_resume_document

    text = (ASSETS / "000_resume-document.resume.json").read_text(encoding="utf-8")
    assert "sha256:…" in text
    doc = parse_resume_document(text.replace("sha256:…", "sha256:" + "0" * 64))
    assert set(doc.answers) == {"summarize"}
    assert set(doc.approvals) == {"deliver", "send/retry"}
    assert doc.approvals["deliver"].approved is True
    assert doc.approvals["send/retry"].value == {"retry": True}


def test_every_refusal_in_the_table_is_listed_with_its_reason() -> None:
    doc = (ASSETS.parents[2] / "docs" / "compatibility.md").read_text(encoding="utf-8")
    plain = {"runs", "parses", "differs"}
    for name, outcome in TABLE.items():
        if outcome in plain or outcome.startswith("failed:"):
            continue
        assert f"`{outcome}`" in doc, f"{name}: {outcome} is not in docs/compatibility.md"

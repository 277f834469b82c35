"""A sealed run as a test file, and its replay against the current package.

``proctor test record --from RUN_ID`` (:func:`record_from`) and ``proctor replay RUN_ID``
(:func:`replay_run`) read a run of this workspace that retained what a replay needs
(``[replay] retain = true``, :mod:`proctor.runtime.records.retention`) and build a test from
its records alone, nothing sent anywhere:

- ``inputs`` from the run record; ``setup.files`` from what the run read before changing it;
  ``setup.egress`` and ``setup.authority`` from the authority the run recorded;
  ``setup.credentials`` a fixture placeholder per credential the method names;
- ``providers.http`` from each ``http.request`` call's retained arguments and its result;
  ``providers.mcp`` from each upstream call's; ``providers.model`` from the retained answers
  of a managed turn's model;
- ``host`` from the decisions recorded on the run's requests (approvals, answers, a close);
- ``expect`` the run's end: status, outcome, the exact output, a verified receipt.

Before any of it is used, the run's receipt tree is verified with the local keys, and every
retained call is checked against it: the digest of the retained arguments must be the
``inputs_digest`` of a call receipt of the same step and tool, and the digest of the result
its ``outputs_digest``. A run store edited after the seal is refused
(``replay_retained_mismatch``), so the test replays what ran. Arguments the run's sanitizer
had to scrub (they held a secret) cannot match their digest; the call is named in the notes
and a replay shows where it differs.

:func:`replay_run` runs that test in a workspace of its own (the HTTP, MCP and model stand-ins
of ``proctor test``: nothing reaches the network) against the package as it is now, and
compares the two runs call by call (:mod:`proctor.testing.trace`): the first call where the
replay did something else is its first divergence.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from proctor.contracts.values import dataclass
from proctor.errors import UsageError
from proctor.testing.retained import retained_test
from proctor.testing.trace import first_divergence

__all__ = ["Replay", "describe", "record_from", "replay_run"]


@dataclass
class Replay:
    """How a replay of a recorded run went (``proctor.replay.v1``)."""

    run_id: str
    diverged: bool
    divergence: dict[str, Any] | None
    test: dict[str, Any]
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        """The ``proctor.replay.v1`` document."""
        return {
            "schema": "proctor.replay.v1",
            "run_id": self.run_id,
            "diverged": self.diverged,
            "divergence": self.divergence,
            "test": self.test,
            "notes": self.notes,
        }


def record_from(run_id: str, out: Path, cwd: Path, environ: Mapping[str, str] | None = None) -> Any:
    """Write the test file of the retained run ``run_id`` to ``out``.

    Raises:
        UsageError: ``record_out_exists``, ``record_out_invalid`` (not
            ``<package>/tests/<name>.yaml``), and as :func:`retained_test`.
        ReceiptInvalid: as :func:`retained_test`.
    """
    from proctor.parser.testfile import parse_test_file
    from proctor.testing.record import Recorded, _dump

    if out.exists():
        raise UsageError(f"{out.name!r} exists; record into a new file", code="record_out_exists")
    if out.suffix not in (".yaml", ".yml") or out.parent.name != "tests":
        raise UsageError(
            "--out is a test file in a package's tests/ folder (PACKAGE/tests/NAME.yaml)",
            code="record_out_invalid",
        )
    retained = retained_test(cwd, run_id, environ)
    text = _dump(retained.document)
    parse_test_file(text, out.name)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("x", encoding="utf-8") as handle:
        handle.write(text)
    providers = retained.document.get("providers") or {}
    summary = (
        f"{len(retained.trace)} calls; {len(providers.get('http') or [])} HTTP exchanges,"
        f" {len(providers.get('mcp') or [])} MCP answers,"
        f" {len((providers.get('model') or {}).get('responses') or [])} model answers"
    )
    if retained.children:  # the test finds them only where proctor test stages them
        named = ", ".join(sorted(child.name for child in retained.children))
        summary += f"; copy the child packages ({named}) under the package's fixtures/skills/"
    if retained.notes:
        summary += "; " + "; ".join(retained.notes)
    return Recorded(out, summary)


def replay_run(cwd: Path, run_id: str, environ: Mapping[str, str] | None = None) -> Replay:
    """Replay the retained run ``run_id`` offline against its package as it is now.

    Raises:
        UsageError, ReceiptInvalid: as :func:`retained_test`.
    """
    import tempfile

    from proctor.testing.record import _dump
    from proctor.testing.report import build_report
    from proctor.testing.runner import Case, run_case

    retained = retained_test(cwd, run_id, environ)
    with tempfile.TemporaryDirectory(prefix="proctor-replay-") as scratch:
        file = Path(scratch) / f"replay-{run_id[:12]}.yaml"
        file.write_text(_dump(retained.document), encoding="utf-8")
        folder = retained.package_folder
        if retained.children:
            folder = _with_children(Path(scratch) / "ws", retained)
        case = Case(folder, file.stem, file, f"replay of {run_id}")
        result = run_case(case, retain=True)
    report = build_report([result])["tests"][0]
    divergence = first_divergence(retained.trace, result.trace)
    if divergence is None and (report["failures"] or report.get("error")):
        first = (report["failures"] or [report["error"]])[0]
        divergence = {"index": len(result.trace), "fields": ["end"], "check": first}
    return Replay(
        run_id=run_id,
        diverged=divergence is not None,
        divergence=_scrubbed(divergence),
        test=report,
        notes=list(retained.notes),
    )


_WORKSPACE_CONFIG = (".mcp.json", "proctor-mcp.lock", "proctor.toml")


def _with_children(base: Path, retained: Any) -> Path:
    """A copy of the package, in a scratch workspace, whose ``fixtures/`` also stage the
    packages its child runs ran, where its references find them in a test's workspace (the
    package is ``skills/<name>/`` there): the children as they are now, like the package."""
    import os
    import shutil

    folder: Path = retained.package_folder
    root: Path = retained.workspace_root
    (base / ".proctor").mkdir(parents=True)
    for name in _WORKSPACE_CONFIG:  # upstream MCP settings are read from the package's workspace
        if (root / name).is_file():
            shutil.copy2(root / name, base / name)
    copy = base / "skills" / folder.name
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("tests"), symlinks=True)
    for child in retained.children:
        where = os.path.normpath(os.path.join("skills", os.path.relpath(child, folder.parent)))
        if where.startswith(".."):
            continue  # out of a test's reach: its calls show as the divergence
        shutil.copytree(child, copy / "fixtures" / where, symlinks=True, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("tests", "fixtures"))  # fmt: skip
    return copy


def _scrubbed(value: Any) -> Any:
    from proctor.runtime.boundary.sanitize import scrub_value

    return scrub_value(value)[0]


def describe(divergence: Mapping[str, Any]) -> list[str]:
    """The first divergence in words, for a person (``proctor replay``'s output)."""
    if "check" in divergence:
        check = divergence["check"]
        return [
            "every call matched; the run ended differently:",
            f"  {check.get('check', check.get('code'))}: {check.get('message')}",
        ]
    was, now = divergence.get("recorded"), divergence.get("replayed")
    index = divergence["index"] + 1
    if was is None:
        what = now or {}
        return [f"call {index}: the replay made {what.get('tool')} at {what.get('step')};"
                " the run did not"]  # fmt: skip
    if now is None:
        return [f"call {index}: the run made {was['tool']} at {was['step']}; the replay did not"]
    lines = [f"call {index} ({was['tool']} at {was['step']}) differs in "
             + ", ".join(divergence["fields"]) + ":"]  # fmt: skip
    for name in divergence["fields"]:
        lines.append(f"  {name}: recorded {was.get(name)!s}, replayed {now.get(name)!s}")
    return lines

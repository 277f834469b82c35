"""Find a package's tests and run each one in its own workspace.

:func:`collect` turns a path into cases: a test file is one case, a package folder (one with
``SKILL.md``) is each of its ``tests/*.yaml`` in name order, any other folder is every package
below it. :func:`run_case` runs one: parse the file, build its workspace
(:mod:`proctor.testing.workspace`), open a session signed with the test key on a fixed clock,
with the HTTP and model stand-ins, let the host stand-in drive the run, read back what it did,
verify its receipts, and check the oracle. A case ends ``passed``, ``failed`` (an expectation
or an always-on check failed) or ``error`` (the test could not be run as written: its file, its
package or its host section is wrong).
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from proctor.contracts.testfile import SkillTest
from proctor.contracts.values import dataclass, field
from proctor.errors import ProctorError, UsageError
from proctor.testing.oracle import Failure, Observed, check

__all__ = ["Case", "CaseResult", "collect", "run_case", "run_cases"]

_SKIP_DIRS = frozenset({".git", ".proctor", "__pycache__", "node_modules", ".venv", "tests"})
Status = Literal["passed", "failed", "error"]


@dataclass(frozen=True)
class Case:
    """One test file of one package."""

    package_folder: Path
    name: str
    file: Path
    label: str

    @property
    def package_label(self) -> str:
        """The package as shown: its folder name."""
        return self.package_folder.name


@dataclass
class CaseResult:
    """How one case ended.

    Attributes:
        secrets: the case's fixture credential values; every report scrubs them.
        workspace: the case's workspace when it was kept (``--keep``).
        authority: what the run ran under (``proctor.test.v1``'s ``authority``), once it ran.
        trace: the run tree's calls by digest (:mod:`proctor.testing.trace`), once it ran.
    """

    case: Case
    test_id: str
    status: Status
    duration_s: float
    failures: list[Failure] = field(default_factory=list)
    error: dict[str, Any] | None = None
    run_id: str | None = None
    receipt_id: str | None = None
    run_status: str | None = None
    outcome: str | None = None
    workspace: Path | None = None
    secrets: list[str] = field(default_factory=list)
    authority: dict[str, Any] | None = None
    trace: list[dict[str, Any]] = field(default_factory=list)


def collect(path: Path, keyword: str | None = None) -> list[Case]:
    """The cases ``path`` names, in order; ``keyword`` keeps those whose ``package/name``
    contains it.

    Raises:
        UsageError: (``test_path_invalid``) the path does not exist, or is a file outside a
            package's ``tests/``; (``no_tests``) nothing to run.
    """
    if not path.exists():
        raise UsageError(f"{path.name!r} does not exist", code="test_path_invalid")
    if path.is_file():
        package = path.parent.parent
        if path.parent.name != "tests" or not (package / "SKILL.md").is_file():
            raise UsageError(
                f"{path.name!r} is not a test: tests live in a package's tests/ folder",
                code="test_path_invalid",
            )
        cases = [_case(package, path)]
    elif (path / "SKILL.md").is_file():
        cases = _package_cases(path)
    else:
        cases = [c for package in _packages(path) for c in _package_cases(package)]
    if keyword:
        cases = [c for c in cases if keyword in f"{c.package_label}/{c.name}"]
    if not cases:
        raise UsageError(f"no tests to run under {path.name or '.'!r}", code="no_tests")
    return cases


def _case(package: Path, file: Path) -> Case:
    try:
        label = os.path.relpath(file)
    except ValueError:
        label = f"{package.name}/tests/{file.name}"
    if label.startswith(".."):
        label = f"{package.name}/tests/{file.name}"
    return Case(package.resolve(), file.stem, file.resolve(), PurePosixPath(label).as_posix())


def _package_cases(package: Path) -> list[Case]:
    folder = package / "tests"
    if not folder.is_dir():
        return []
    files = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    return [_case(package, f) for f in files]


def _packages(root: Path) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        if "SKILL.md" in filenames:
            found.append(Path(dirpath))
            dirnames[:] = []  # a package's own folders are not packages
    return found


def run_cases(
    cases: Iterable[Case],
    *,
    keep: bool = False,
    on_start: Callable[[Case], None] | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Run every case in order; ``on_start``/``on_result`` report progress.

    Each finished workspace is removed by a sweeper thread while the next case runs (removing
    a tree is mostly waiting on the disk); every one is gone when this returns.
    """
    results = []
    packages: dict[Path, Any] = {}
    sweeper = _Sweeper()
    try:
        for case in cases:
            if on_start is not None:
                on_start(case)
            result = run_case(case, keep=keep, packages=packages, remove=sweeper.put)
            results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        sweeper.close()
    return results


class _Sweeper:
    """Removes test workspaces on a thread of its own, in the order they are handed over."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Path | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="proctor-test-sweeper")
        self._thread.start()

    def put(self, root: Path) -> None:
        self._queue.put(root)

    def _work(self) -> None:
        while (root := self._queue.get()) is not None:
            shutil.rmtree(root, ignore_errors=True)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()


def run_case(
    case: Case,
    *,
    keep: bool = False,
    packages: dict[Path, Any] | None = None,
    remove: Callable[[Path], None] | None = None,
    retain: bool = False,
) -> CaseResult:
    """Run one case in a workspace of its own, removed afterwards unless ``keep`` (by
    ``remove`` when given, else before this returns). ``retain``: its runs keep their
    calls' scrubbed arguments (a replay compares them with the recorded run's)."""
    started = time.perf_counter()
    test_id = f"{case.package_label}/{case.name}"
    secrets: list[str] = []
    built = None
    try:
        from proctor.parser.testfile import parse_test_file

        test = parse_test_file(_read(case.file), case.label)
        skill = _package(case.package_folder, packages)
        test_id = f"{skill.package.name}/{case.name}"
        from proctor.testing.workspace import build_workspace, scratch_base

        built = build_workspace(
            test,
            package_folder=case.package_folder,
            package_name=skill.package.name,
            profile=skill.package.profile,
            test_id=test_id,
            base=scratch_base(case.package_folder),
            keep=keep,
        )
        secrets = built.secrets
        observed, authority = _run(case, test, test_id, built, retain=retain)
        failures = check(test.expect, observed)
        env = observed.envelope
        return CaseResult(
            case,
            test_id,
            "failed" if failures else "passed",
            time.perf_counter() - started,
            failures=failures,
            run_id=env.get("run_id"),
            receipt_id=env.get("receipt_id"),
            run_status=env.get("status"),
            outcome=env.get("outcome"),
            workspace=built.root if keep else None,
            secrets=secrets,
            authority=authority,
            trace=observed.trace,
        )
    except ProctorError as exc:
        return CaseResult(
            case,
            test_id,
            "error",
            time.perf_counter() - started,
            error={"code": exc.code, "message": exc.message},
            workspace=built.root if keep and built else None,
            secrets=secrets,
        )
    finally:
        if built is not None and not keep:
            if remove is not None:
                remove(built.root)
            else:
                built.remove()


def _read(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"{file.name!r} cannot be read as UTF-8 text", code="test_unreadable"
        ) from exc


def _package(folder: Path, cache: dict[Path, Any] | None) -> Any:
    if cache is not None and folder in cache:
        return cache[folder]
    from proctor.runtime.skills import load_skill

    skill = load_skill(str(folder), cwd=folder, workspace_root=folder.parent)
    if skill.package.profile is None:
        raise UsageError(f"package {skill.package.name} has no run.yaml to test", code="no_methods")
    if cache is not None:
        cache[folder] = skill
    return skill


def _run(
    case: Case, test: SkillTest, test_id: str, built: Any, *, retain: bool = False
) -> tuple[Observed, dict[str, Any]]:
    from proctor.core.authority import parse_authority
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session
    from proctor.testing.host import HostStandIn
    from proctor.testing.http import HttpFixtures
    from proctor.testing.keys import fixed_clock, fixture_signer, run_ids_for
    from proctor.testing.trace import call_trace

    fixtures = HttpFixtures.from_exchanges(test.providers.http, case.label)
    if test.setup.egress:
        from proctor.runtime.boundary.egress_allow import EgressAllow

        fixtures.allow = EgressAllow.parse(test.setup.egress)
    agent = script = None
    if test.providers.model is not None:
        from proctor.testing.model import scripted_agent

        agent, script = scripted_agent(test.providers.model)
    from proctor.runtime.gateway.standing import stand_in, withdraw
    from proctor.testing.mcp import McpFixtures, stand_in_upstreams

    mcp = McpFixtures(test.providers.mcp, case.label)
    from proctor.testing.processes import ProcessFixtures

    processes = ProcessFixtures(test.providers.processes, case.label)
    upstreams = stand_in_upstreams(case.package_folder, built.root, built.environ, mcp)
    if upstreams is not None:  # upstream MCP calls are answered by providers.mcp alone
        stand_in(built.root, upstreams)
    session = Session(
        Workspace(built.root),
        environ=built.environ,
        clock=fixed_clock(),
        signer=fixture_signer(),
        run_ids=run_ids_for(test_id),
        agent_driver=agent,
        egress_route=fixtures.route(),
        process_route=processes.answer if processes.active else None,
        durable=False,
        retain=retain,
    )
    host = HostStandIn(test.host)
    try:
        # the run store first: seeded run receipts are the test's set-up, and a store opened
        # after them would take them for the record of a store that went missing
        session.store  # noqa: B018 - opening it is the point
        _seed_receipts(session, case, test)
        authority = None
        if test.setup.authority is not None:
            authority = parse_authority(dict(test.setup.authority))
        ref = built.package_ref + (f"#{test.method}" if test.method else "")
        envelope = host.drive(
            session, ref, inputs=dict(test.inputs), authority=authority, cwd=built.root
        )
        env = envelope.to_json()
        run_id = env.get("run_id")
        steps = session.store.step_records(run_id) if run_id else {}
        trace = call_trace(session.store, run_id) if run_id else []
        record = session.store.get_run(run_id) if run_id else None
        ran_under = _authority(test, built.root, fixtures, record.data if record else {})
    finally:
        session.close()
        withdraw(built.root)
        if agent is not None:
            agent.close()
    receipt = _verify(built.root, env.get("receipt_id"))
    observed = Observed(
        envelope=env,
        steps=steps,
        audit=_audit_lines(built.root),
        root=built.root,
        receipt=receipt,
        receipt_body=_root_body(built.root, env.get("receipt_id")),
        http_counts=list(fixtures.counts),
        http_declared=[f"{d.method} {d.url}" for d in fixtures.declared],
        unmatched=list(fixtures.unmatched),
        unused_host=host.unused(),
        unused_model=(len(script.responses) - script.served) if script is not None else 0,
        call_failures=list(host.call_failures) + processes.failures(),
        trace=trace,
    )
    return observed, ran_under


def _authority(test: SkillTest, root: Path, fixtures: Any, run: dict[str, Any]) -> dict[str, Any]:
    """What the run ran under, read from what was loaded and recorded, not from what the test
    was meant to be: the policy files of its workspace, the guard modules that workspace
    names (a test stages no config, so none), and the authority its run recorded."""
    from proctor.policy import read_guard_files, shipped_policy_sources
    from proctor.policy.loader import workspace_policy_sources

    policies = [s.name for s in shipped_policy_sources()]
    policies += [s.name for s in workspace_policy_sources(root)]
    recorded = run.get("authority")
    return {
        "policies": policies,
        "policy_digest": run.get("policy_digest"),
        "guard_modules": [f.path for f in read_guard_files(root).modules],
        "authority": recorded if isinstance(recorded, dict) else None,
        "egress": list(test.setup.egress),
        "http": [f"{d.method} {d.url}" for d in fixtures.declared],
        "credentials": sorted(test.setup.credentials),
        "model": test.providers.model is not None,
        "processes": sorted({p.tool for p in test.providers.processes}),
    }


def _root_body(root: Path, receipt_id: str | None) -> dict[str, Any] | None:
    """The sealed root receipt's body, for ``expect.receipt`` (``None`` when none sealed or it
    cannot be read; the verification reports that)."""
    if receipt_id is None:
        return None
    from proctor.receipts.model import parse_envelope
    from proctor.runtime.records.folder_reader import FolderReader

    data = FolderReader(root / ".proctor" / "receipts")(receipt_id)
    if data is None:
        return None
    try:
        body: dict[str, Any] = parse_envelope(data).body
    except ProctorError:
        return None
    return body


def _verify(root: Path, receipt_id: str | None) -> tuple[bool, str] | None:
    if receipt_id is None:
        return None
    from proctor.runtime.records.verify_folder import verify_receipt
    from proctor.testing.keys import fixture_public_key

    result = verify_receipt(
        receipt_id, receipts_dir=root / ".proctor" / "receipts", public_key=fixture_public_key()
    )
    return result.ok, result.reason


def _audit_lines(root: Path) -> list[dict[str, Any]]:
    path = root / ".proctor" / "audit.jsonl"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


def _seed_receipts(session: Any, case: Case, test: SkillTest) -> None:
    """Place the test's ``setup.receipts`` in its store, each verified under the test key,
    with every receipt below it (read from the same folder, as the verification did).

    Raises:
        UsageError: ``test_receipt_invalid``: not a package-relative ``.json`` file, or it does
            not verify under the test key.
    """
    from proctor.runtime.records.verify_folder import verify_receipt
    from proctor.testing.keys import fixture_public_key

    for rel in test.setup.receipts:
        path = PurePosixPath(rel)
        if path.is_absolute() or ".." in path.parts or path.suffix != ".json":
            raise UsageError(
                f"setup.receipts entry {rel!r} is not a package-relative .json file",
                code="test_receipt_invalid",
            )
        file = case.package_folder / rel
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise UsageError(
                f"setup.receipts entry {rel!r} cannot be read", code="test_receipt_invalid"
            ) from exc
        result = verify_receipt(file, public_key=fixture_public_key())
        if not result.ok or result.receipt_id is None:
            raise UsageError(
                f"setup.receipts entry {rel!r} does not verify under the test key "
                f"({result.reason})",
                code="test_receipt_invalid",
            )
        _put_tree(session, file.parent, result.receipt_id, data)


def _put_tree(session: Any, folder: Path, receipt_id: str, data: bytes) -> None:
    """Store a verified receipt and its tree (children read from ``folder`` by id)."""
    from proctor.receipts.model import parse_envelope
    from proctor.runtime.records.receipts import receipt_hex

    pending = [(receipt_id, data)]
    while pending:
        rid, raw = pending.pop()
        env = parse_envelope(raw)
        session.receipts.put(rid, raw, kind=env.kind, outcome=str(env.body.get("outcome")))
        for child in env.children:
            path = folder / f"{receipt_hex(child.receipt_id)}.json"
            pending.append((child.receipt_id, path.read_bytes()))

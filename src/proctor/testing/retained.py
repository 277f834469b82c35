"""A sealed, retained run read back as a test document: :func:`retained_test`.

The seam: this module only reads (the run store, the receipts, the package's credential
declarations) and builds the ``SkillTest`` document; :mod:`proctor.testing.replay` writes it
(``proctor test record --from``) or runs it (``proctor replay``). See that module for what a
test made from a run holds and how the retained calls are checked against the receipts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.contracts.values import dataclass, field
from proctor.errors import ReceiptInvalid, UsageError
from proctor.receipts.canonical import digest
from proctor.runtime.records.retention import MODEL_ANSWER_EVENT, RETAINED_ARGS
from proctor.testing.trace import call_trace, tree_runs

if TYPE_CHECKING:
    from proctor.runtime.boundary.sanitize import TaintSet

__all__ = ["Retained", "retained_test"]

_MARKER = "[REDACTED:"


@dataclass
class Retained:
    """A retained run read back as a test.

    Attributes:
        document: the test file's content (a ``SkillTest`` document).
        package_folder: the package the run ran (``local:`` identity in this workspace).
        trace: the recorded run tree's calls (:func:`proctor.testing.trace.call_trace`).
        notes: what could not be made replayable, one sentence each.
    """

    run_id: str
    document: dict[str, Any]
    package_folder: Path
    trace: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    workspace_root: Path | None = None
    children: list[Path] = field(default_factory=list)
    """The folders of the other local packages the run's child runs ran (a replay stages
    them beside the package)."""


def retained_test(cwd: Path, run_id: str, environ: Mapping[str, str] | None = None) -> Retained:
    """The test file a retained, sealed run of the workspace at ``cwd`` becomes.

    Raises:
        UsageError: ``run_not_found``, ``run_not_sealed``, ``replay_not_retained`` (the run
            kept no arguments: ``[replay] retain`` was off), ``replay_package_unknown`` (the
            run's package is not a folder of this workspace).
        ReceiptInvalid: ``replay_unverified`` (the receipt tree does not verify with the
            local keys), ``replay_retained_mismatch`` (a retained call is not the one its
            receipt commits).
    """
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session

    env = os.environ if environ is None else environ
    session = Session(Workspace.discover(cwd), environ=env)
    try:
        record = session.store.get_run(run_id)
        if record is None:
            raise UsageError(f"no run {run_id[:80]!r} in this workspace", code="run_not_found")
        if record.receipt_id is None:
            raise UsageError(
                f"run {run_id} has not sealed; only a sealed run is recorded as a test",
                code="run_not_sealed",
            )
        if not record.data.get("retain"):
            raise UsageError(
                f"run {run_id} did not retain its calls' arguments, so it cannot be replayed;"
                " set [replay] retain = true in proctor.toml and run it again",
                code="replay_not_retained",
            )
        vouched = _vouched(record.receipt_id, session, env)
        folder = _package_folder(session.workspace.root, record)
        runs = tree_runs(session.store, run_id)
        calls = [c for rid in runs for c in session.store.calls(rid) if c.state == "settled"]
        notes = _check_retained(calls, vouched)
        builder = _Builder(session, record, folder, calls, runs, notes)
        document = builder.document()
        children = _child_folders(session, runs[1:], folder)
        return Retained(
            run_id,
            document,
            folder,
            call_trace(session.store, run_id),
            notes,
            workspace_root=session.workspace.root,
            children=children,
        )
    finally:
        session.close()


def _vouched(receipt_id: str, session: Any, environ: Mapping[str, str]) -> set[tuple[Any, ...]]:
    from proctor.receipts.verify import verify_tree
    from proctor.runtime.home.keys import trusted_local_keys
    from proctor.runtime.records.export import tree_bodies

    load = session.receipts.get
    checked = verify_tree(receipt_id, load, trusted_local_keys(environ))
    if not checked.ok:
        raise ReceiptInvalid(
            f"receipt {receipt_id} does not verify ({checked.status}: {checked.reason});"
            f" nothing was recorded. `proctor verify {receipt_id}` shows why",
            code="replay_unverified",
        )
    return {
        (
            body["subject"].get("step_id"),
            body["subject"].get("tool"),
            body.get("inputs_digest"),
            body.get("outputs_digest"),
        )
        for _, body in tree_bodies(receipt_id, load)
        if body["kind"] == "call"
    }


def _check_retained(calls: list[Any], vouched: set[tuple[Any, ...]]) -> list[str]:
    """Every retained call must be one its receipt commits (arguments and result by digest)."""
    notes: list[str] = []
    for call in calls:
        settled = call.result if isinstance(call.result, Mapping) else {}
        if RETAINED_ARGS not in settled:
            continue
        outputs = None
        if settled.get("status") == "completed":
            outputs = digest(settled.get("result"))
        args = settled[RETAINED_ARGS]
        if digest(args) != call.args_digest:
            if _MARKER in repr(args):
                notes.append(
                    f"call {call.call_id} ({call.tool}): its arguments held a secret and were"
                    " kept scrubbed; the replay sends the scrubbed form"
                )
            else:
                raise ReceiptInvalid(
                    f"the arguments kept for call {call.call_id} ({call.tool}) are not the"
                    " ones its receipt commits; the run store was changed after the seal",
                    code="replay_retained_mismatch",
                )
        if (call.step_id, call.tool, call.args_digest, outputs) not in vouched:
            raise ReceiptInvalid(
                f"call {call.call_id} ({call.tool}) as the run store holds it is not in the"
                " run's receipt tree; the run store was changed after the seal",
                code="replay_retained_mismatch",
            )
    return notes


def _child_folders(session: Any, child_runs: list[str], own: Path) -> list[Path]:
    found: list[Path] = []
    for rid in child_runs:
        record = session.store.get_run(rid)
        if record is None:
            continue
        try:
            folder = _package_folder(session.workspace.root, record)
        except UsageError:
            continue  # a core or registry package: the test resolves it as a run does
        if folder != own and folder not in found:
            found.append(folder)
    return found


def _package_folder(root: Path, record: Any) -> Path:
    identity = str(record.identity or record.data.get("identity") or "")
    if identity.startswith("local:"):
        folder = (root / identity.removeprefix("local:")).resolve()
        if folder.is_relative_to(root.resolve()) and (folder / "SKILL.md").is_file():
            return folder
    raise UsageError(
        f"run {record.run_id} ran package {identity or record.skill!r}, which is not a folder"
        " of this workspace; only a local package is replayed",
        code="replay_package_unknown",
    )


class _Builder:
    """Builds the test document of one retained run tree."""

    def __init__(
        self,
        session: Any,
        record: Any,
        folder: Path,
        calls: list[Any],
        runs: list[str],
        notes: list[str],
    ) -> None:
        self.session = session
        self.record = record
        self.folder = folder
        self.calls = calls
        self.runs = runs
        self.notes = notes

    def document(self) -> dict[str, Any]:
        from proctor.runtime.boundary.sanitize import scrub_value
        from proctor.testing.record import _files_read

        credentials, taint = self._credentials()

        def scrub(value: Any) -> Any:
            return scrub_value(value, taint)[0]

        data = self.record.data
        doc: dict[str, Any] = {
            "description": f"Replays run {self.record.run_id} of"
            f" {self.record.skill}#{self.record.method}, recorded from its retained calls.",
            "method": self.record.method,
            "inputs": scrub(data.get("inputs") or {}),
        }
        setup: dict[str, Any] = {}
        read = scrub(_files_read(self.calls))
        if read:
            setup["files"] = read
        if credentials:
            setup["credentials"] = credentials
        authority = data.get("authority") if isinstance(data.get("authority"), dict) else {}
        granted = _granted(authority)
        if granted:
            setup["authority"] = granted
        egress = authority.get("egress") or {}
        allowed = [*egress.get("hosts", []), *egress.get("networks", [])]
        if allowed:
            setup["egress"] = allowed
        if setup:
            doc["setup"] = setup
        host = self._host()
        if host:
            doc["host"] = scrub(host)
        providers = self._providers()
        if providers:
            doc["providers"] = scrub(providers)
        envelope = data.get("envelope") or {}
        expect: dict[str, Any] = {"status": self.record.status}
        if self.record.outcome:
            expect["outcome"] = self.record.outcome
        if self.record.status == "sealed":
            expect["output"] = {"exact": scrub(envelope.get("result"))}
            expect["receipt"] = "verified"
        doc["expect"] = expect
        return doc

    def _credentials(self) -> tuple[dict[str, str], TaintSet]:
        """A fixture placeholder per credential the method names, and a taint set of what
        those credentials resolve to here now: a value the run did not scrub where it kept it
        (its inputs are kept as given) is scrubbed from the test all the same."""
        from proctor.parser.skill import select_method
        from proctor.runtime.boundary.sanitize import TaintSet
        from proctor.runtime.engine.delivery import step_credentials
        from proctor.runtime.skills import load_skill

        taint = TaintSet()
        root = self.session.workspace.root
        skill = load_skill(str(self.folder), cwd=root, workspace_root=root)
        profile = skill.package.profile
        if profile is None:
            return {}, taint
        _, method = select_method(profile, self.record.method)
        used = sorted({n for n in step_credentials(method).values() if n})
        if used:
            _resolved_taint(skill, used, root, self.session.environ, taint)
        placeholders = {profile.credentials[n].provider: f"fixture-{n}-credential" for n in used}
        return placeholders, taint

    def _host(self) -> dict[str, Any]:
        answers: dict[str, Any] = {}
        approvals: dict[str, bool] = {}
        turns: dict[str, Any] = {}
        for request in self.session.store.requests(self.record.run_id):
            decision = request.decision
            if not isinstance(decision, Mapping):
                continue
            if request.kind == "agent_turn" and self._managed(request.address):
                continue  # the model answered it
            worked = self._worked(request.address) if request.kind == "agent_turn" else []
            if worked:  # a host made the turn's calls one by one, then ended it
                turn: dict[str, Any] = {"calls": worked}
                failure = decision.get("failure")
                if "value" in decision:
                    turn["output"] = decision["value"]
                elif isinstance(failure, Mapping) and failure.get("reason"):
                    turn["failure"] = str(failure["reason"])
                turns[request.address] = turn
            elif request.kind in ("approval", "retry"):
                value = decision.get("approved")
                if value is None:
                    value = decision.get("retry")
                if isinstance(value, bool):
                    approvals[request.address] = value
            elif "value" in decision:
                answers[request.address] = decision["value"]
        host: dict[str, Any] = {}
        if answers:
            host["answers"] = answers
        if approvals:
            host["approvals"] = approvals
        if turns:
            host["turns"] = turns
        for event in self.session.store.events(self.record.run_id):
            if event.get("kind") == "closed":
                host["close"] = event["body"].get("outcome")
        return host

    def _worked(self, address: str) -> list[dict[str, Any]]:
        """The calls a host made in the turn at ``address`` (``<step>/turn/<call id>``), with
        the arguments the run kept, in the order they were made."""
        prefix = f"{address}/turn/"
        out = []
        for call in self.calls:
            settled = call.result if isinstance(call.result, Mapping) else {}
            args = settled.get(RETAINED_ARGS)
            if call.run_id != self.record.run_id or not call.call_id.startswith(prefix):
                continue
            if not isinstance(args, Mapping):
                self.notes.append(
                    f"call {call.call_id} ({call.tool}) of a worked turn kept no arguments;"
                    " it is not made in the replay"
                )
                continue
            out.append({"tool": call.tool, "arguments": dict(args),
                        "call_id": call.call_id.removeprefix(prefix)})  # fmt: skip
        return out

    def _managed(self, address: str) -> bool:
        return any(self._model_events(step=address))

    def _model_events(self, step: str | None = None) -> list[dict[str, Any]]:
        found = []
        for rid in self.runs:
            for event in self.session.store.events(rid):
                body = event.get("body") or {}
                if event.get("kind") == MODEL_ANSWER_EVENT and step in (None, body.get("step")):
                    found.append({"at": event.get("at"), **body})
        return sorted(found, key=lambda e: str(e["at"]))

    def _providers(self) -> dict[str, Any]:
        from proctor.runtime.boundary.egress import canonical_url

        http: list[dict[str, Any]] = []
        mcp: list[dict[str, Any]] = []
        for call in self.calls:
            settled = call.result if isinstance(call.result, Mapping) else {}
            args = settled.get(RETAINED_ARGS)
            result = settled.get("result")
            if settled.get("status") != "completed" or not isinstance(args, Mapping):
                continue
            if call.tool == "http.request" and isinstance(result, Mapping):
                if result.get("redirects") or result.get("truncated"):
                    self.notes.append(
                        f"call {call.call_id} (http.request) followed redirects or was cut;"
                        " its hops were not kept, so it does not replay"
                    )
                    continue
                request: dict[str, Any] = {
                    "method": args["method"],
                    "url": str(canonical_url(str(args["url"]))),
                }
                if "json" in args:
                    request["body"] = {"json": args["json"]}
                elif "body" in args:
                    request["body"] = {"text": args["body"]}
                response = {
                    "status": result.get("status"),
                    "headers": dict(result.get("headers") or {}),
                    "body": result.get("body") or "",
                }
                exchange = {"request": request, "response": response}
                if exchange not in http:
                    http.append(exchange)
            elif call.tool.startswith("mcp:") and isinstance(result, Mapping):
                answer: dict[str, Any] = {
                    "content": list(result.get("content") or []),
                    "is_error": bool(result.get("isError") or result.get("is_error")),
                }
                structured = result.get("structuredContent") or result.get("structured_content")
                if isinstance(structured, Mapping):
                    answer["structured_content"] = dict(structured)
                entry = {"tool": call.tool.removeprefix("mcp:"), "arguments": dict(args),
                         "result": answer}  # fmt: skip
                if entry not in mcp:
                    mcp.append(entry)
        out: dict[str, Any] = {}
        if http:
            out["http"] = http
        answers = self._model_events()
        if answers:
            first = answers[0]
            model: dict[str, Any] = {
                "dialect": first.get("dialect"),
                "responses": [a.get("document") for a in answers],
            }
            if first.get("model"):
                model["model"] = first["model"]
            out["model"] = model
        if mcp:
            out["mcp"] = mcp
        return out


def _resolved_taint(
    skill: Any, used: list[str], root: Path, environ: Mapping[str, str], taint: TaintSet
) -> None:
    """Add to ``taint`` what ``used`` resolve to in this workspace now (as a run resolves
    them); a credential that does not resolve here adds nothing."""
    from proctor.errors import CredentialError
    from proctor.runtime.home.credentials import (
        CredentialStore,
        resolve_credentials,
        snapshot_environment,
    )

    home = environ.get("PROCTOR_HOME")
    backend = environ.get("PROCTOR_SECRET_BACKEND", "").strip().lower() or None
    try:
        resolve_credentials(
            skill.package.profile.credentials,
            skill=skill.package.name,
            workspace_root=root,
            env=snapshot_environment(root, environ),
            store=CredentialStore(Path(home) if home else None, backend=backend),
            taint=taint,
            only=used,
            identity=skill.identity or None,
        )
    except CredentialError:
        return


def _granted(authority: Mapping[str, Any]) -> dict[str, Any]:
    """What a host granted the run, as a test's ``setup.authority`` (nothing when the run
    ran under ``proctor run``'s default, which a test takes too)."""
    if not authority or authority.get("set_by") == "default":
        return {}
    return {
        k: v
        for k, v in authority.items()
        if k not in ("set_by", "egress") and v not in (None, [], {})
    }

"""``proctor test record``: run a method for real and write a test file from what it saw.

The run is an ordinary run of the current workspace (its run store, receipts, audit log, the
home's key and credentials). Two things are added:

- every HTTP exchange is copied on its way, after the egress guard has checked it (the
  session's :class:`~proctor.runtime.boundary.egress.EgressRoute` wraps a real connection
  pool), and kept as a ``providers.http`` entry;
- a person at the terminal answers what the run pauses on: approvals and retry questions
  (yes/no), questions, and agent turns (their output typed as JSON). Each answer is kept
  under ``host``.

The workspace's egress allow-list, which the run recorded in its authority, becomes
``setup.egress`` (a test never stages a ``proctor.toml``). The test file then gets the run's
end as its ``expect`` (status, outcome, the exact output, ``receipt: verified``). Every
credential value delivered during the run (each ``Authorization`` header the pool saw) is
replaced by a fixture placeholder wherever it appears, and ``setup.credentials`` gives the
placeholder to the provider. The file is read
back with the strict loader before it is written, so what is written replays.

Files the run read whole from the workspace before changing them are staged as
``setup.files`` with the content it read, so the replay reads the same text.

Not recorded: managed turns (the recording session has no agent driver, so a turn pauses
and the person types its output; write ``providers.model`` by hand for a managed test),
worked turns (a turn is answered as a whole output), and what the output says of the rest of
the workspace (a folder listing names the recording workspace's files: loosen such an
``expect.output`` to a ``subset``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import httpx
import yaml

from proctor.contracts.values import dataclass, field
from proctor.errors import UsageError
from proctor.runtime.tools.http import RESULT_HEADERS
from proctor.testing.http_transport import original_url

__all__ = ["Prompter", "Recorded", "RecordingPool", "TerminalPrompter", "record_test"]

_MAX_RECORDED_BODY = 4 * 1024 * 1024
_FRAMING = frozenset({"content-encoding", "transfer-encoding", "content-length"})


@dataclass
class Recorded:
    """What ``record_test`` wrote."""

    path: Path
    summary: str


@dataclass
class RecordingPool:
    """Builds real connection pools whose exchanges are copied into :attr:`exchanges`."""

    exchanges: list[dict[str, Any]] = field(default_factory=list)
    delivered: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, verify: Any) -> httpx.BaseTransport:
        return _Recording(httpx.HTTPTransport(verify=verify, proxy=None, retries=0), self)


class _Recording(httpx.BaseTransport):
    def __init__(self, inner: httpx.BaseTransport, pool: RecordingPool) -> None:
        self.inner = inner
        self.pool = pool

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = str(original_url(request))
        content = request.read()
        auth = request.headers.get("authorization")
        response = self.inner.handle_request(request)
        body = bytearray()
        try:
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > _MAX_RECORDED_BODY:
                    raise UsageError(
                        "a response is larger than 4 MiB; it cannot be kept in a test file",
                        code="record_response_too_large",
                    )
        finally:
            response.close()
        # The body is kept decoded, so the response handed on (and kept) is one without its
        # transfer framing; a result shows the same headers live and in the replay.
        returned = httpx.Response(
            response.status_code,
            headers=[(k, v) for k, v in response.headers.items() if k.lower() not in _FRAMING],
            content=bytes(body),
        )
        with self.pool._lock:
            if auth:
                self.pool.delivered.add(auth)
                self.pool.delivered.add(auth.split(" ", 1)[-1])
            self.pool.exchanges.append(
                {
                    "method": request.method,
                    "url": url,
                    "content": content,
                    "status": response.status_code,
                    # only what a result may show: never Set-Cookie or an auth challenge
                    "headers": {
                        k.lower(): v
                        for k, v in returned.headers.items()
                        if k.lower() in RESULT_HEADERS
                    },
                    "body": bytes(body),
                }
            )
        return returned

    def close(self) -> None:
        self.inner.close()


class Prompter(Protocol):
    """How the person at the terminal is asked (tests pass one with scripted answers)."""

    def confirm(self, text: str) -> bool:
        """A yes/no question."""
        ...

    def text(self, text: str) -> str:
        """A line of free text."""
        ...

    def show(self, text: str) -> None:
        """Something the person should read before answering."""
        ...


class TerminalPrompter:
    """Asks at the terminal with click."""

    def confirm(self, text: str) -> bool:
        import click

        return bool(click.confirm(text, default=False, err=True))

    def text(self, text: str) -> str:
        import click

        return str(click.prompt(text, err=True))

    def show(self, text: str) -> None:
        import click

        click.echo(text, err=True)


def record_test(
    ref: str,
    *,
    inputs: dict[str, Any] | None,
    cli_inputs: list[str],
    out: Path,
    cwd: Path,
    prompter: Prompter | None = None,
    environ: dict[str, str] | None = None,
    clock: Callable[[], Any] | None = None,
    act: Any = None,
) -> Recorded:
    """Run ``ref`` for real, asking the person, and write the test file ``out``; ``act`` is the
    act the host states for the run (``--act``), written as the test's ``host.act``.

    Raises:
        UsageError: ``record_out_exists`` (``out`` exists: a recording never overwrites a
            test), ``record_out_invalid`` (``out`` is not ``<package>/tests/<name>.yaml``),
            ``record_unsupported`` (the run paused on something a recording cannot answer),
            ``record_response_too_large``; and what ``proctor run`` raises for a bad
            reference or inputs.
    """
    from proctor.parser.inputs import coerce_cli_inputs
    from proctor.parser.skill import select_method
    from proctor.runtime.boundary.egress import EgressRoute, SystemResolver
    from proctor.runtime.boundary.egress_allow import load_egress_allow
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.engine.session import Session
    from proctor.runtime.packages.resolve import resolve_skill

    if out.exists():
        raise UsageError(f"{out.name!r} exists; record into a new file", code="record_out_exists")
    if out.suffix not in (".yaml", ".yml") or out.parent.name != "tests":
        raise UsageError(
            "--out is a test file in a package's tests/ folder (PACKAGE/tests/NAME.yaml)",
            code="record_out_invalid",
        )
    prompter = prompter or TerminalPrompter()
    workspace = Workspace.discover(cwd)
    skill = resolve_skill(ref, cwd=cwd, workspace_root=workspace.root)
    if skill.package.profile is None:
        raise UsageError(f"skill {skill.package.name} has no run.yaml", code="no_methods")
    method_name, method = select_method(skill.package.profile, skill.method)
    typed = dict(inputs or {})
    if cli_inputs:
        typed.update(coerce_cli_inputs(cli_inputs, method.inputs))
    pool = RecordingPool()
    route = EgressRoute(resolver=SystemResolver(), pool_factory=pool)
    extra: dict[str, Any] = {} if clock is None else {"clock": clock}
    session = Session(workspace, environ=environ, egress_route=route, **extra)
    host: dict[str, dict[str, Any]] = {"answers": {}, "approvals": {}}
    try:
        env = session.run(ref, inputs=typed, cwd=cwd, act=act)
        while env.status in ("needs_agent", "needs_approval") and env.run_id is not None:
            doc = _ask(env.to_json(), prompter, host)
            env = session.resume(env.run_id, doc)
        read = _files_read(session.store.calls(env.run_id)) if env.run_id else {}
    finally:
        session.close()
    doc = _test_document(method_name, typed, skill, method, env.to_json(), pool, host)
    if act is not None:  # what the host stated comes first in the host section
        doc["host"] = {"act": act, **doc.get("host", {})}
    if read:
        doc.setdefault("setup", {})["files"] = read
    allow = load_egress_allow(workspace.root).to_authority()
    if allow["hosts"] or allow["networks"]:
        # the run's allow-list is part of what it did: the replay is checked against the same
        doc.setdefault("setup", {})["egress"] = [*allow["hosts"], *allow["networks"]]
    doc = {k: doc[k] for k in ("description", "method", "inputs", "setup") if k in doc} | doc
    text = _dump(doc)
    from proctor.parser.testfile import parse_test_file

    parse_test_file(text, out.name)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("x", encoding="utf-8") as handle:
        handle.write(text)
    parts = [f"{len(pool.exchanges)} HTTP exchanges"]
    parts.append(f"{len(host['answers'])} answers, {len(host['approvals'])} approvals")
    parts.append(f"run {env.status}" + (f" {env.outcome}" if env.outcome else ""))
    return Recorded(out, "; ".join(parts))


def _ask(env: dict[str, Any], prompter: Prompter, host: dict[str, dict[str, Any]]) -> Any:
    template = env.get("answers_template") or {}
    by_address = {str(r.get("address")): r for r in env.get("requests") or []}
    doc: dict[str, Any] = {"schema": "proctor.resume.v1"}
    for address, entry in (template.get("answers") or {}).items():
        request = by_address.get(address, {})
        prompter.show(f"agent turn at {address}: {request.get('instructions', '')}")
        prompter.show("inputs: " + json.dumps(request.get("inputs"), ensure_ascii=False))
        if request.get("output_schema"):
            prompter.show("output schema: " + json.dumps(request["output_schema"]))
        raw = prompter.text("the turn's output (JSON)")
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise UsageError("the turn's output is not JSON", code="record_answer_invalid") from exc
        host["answers"][address] = value
        doc.setdefault("answers", {})[address] = {
            "request_digest": entry["request_digest"],
            "value": value,
        }
    for address, entry in (template.get("approvals") or {}).items():
        request = by_address.get(address, {})
        kind = request.get("kind")
        digest = entry["request_digest"]
        if kind == "question":
            answers: dict[str, Any] = {}
            for question in request.get("questions") or []:
                options = question.get("options") or question.get("choices") or []
                hint = f" [{'/'.join(map(str, options))}]" if options else ""
                reply = prompter.text(f"{question.get('prompt')}{hint}")
                key = "option" if options and reply in options else "text"
                answers[str(question.get("id"))] = {key: reply}
            host["answers"][address] = answers
            doc.setdefault("approvals", {})[address] = {"request_digest": digest, "value": answers}
            continue
        what = request.get("reason") or request.get("question") or request.get("tool") or kind
        payload = request.get("payload")
        if payload:
            prompter.show(json.dumps(payload, indent=2, ensure_ascii=False))
        yes = prompter.confirm(f"{kind} at {address}: {what}. Approve?")
        host["approvals"][address] = yes
        value = {"value": {"retry": yes}} if kind == "retry" else {"approved": yes}
        doc.setdefault("approvals", {})[address] = {"request_digest": digest, **value}
    if len(doc) == 1:
        raise UsageError(
            "the run waits on something a recording cannot answer",
            code="record_unsupported",
        )
    return doc


def _test_document(
    method_name: str,
    inputs: dict[str, Any],
    skill: Any,
    method: Any,
    env: dict[str, Any],
    pool: RecordingPool,
    host: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    from proctor.runtime.engine.delivery import step_credentials

    profile = skill.package.profile
    used = sorted({n for n in step_credentials(method).values() if n})
    placeholders = {n: f"fixture-{n}-credential" for n in used}
    credentials = {profile.credentials[n].provider: placeholders[n] for n in used}
    secrets = sorted(pool.delivered, key=len, reverse=True)
    fill = next(iter(placeholders.values()), "fixture-credential")

    def clean(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, fill)
        return text

    exchanges = []
    for ex in pool.exchanges:
        request: dict[str, Any] = {"method": ex["method"], "url": clean(ex["url"])}
        if ex["content"]:
            try:
                request["body"] = {"json": json.loads(ex["content"])}
            except (ValueError, UnicodeDecodeError):
                request["body"] = {"text": ex["content"].decode("utf-8", errors="replace")}
        response = {
            "status": ex["status"],
            "headers": ex["headers"],
            "body": clean(ex["body"].decode("utf-8", errors="replace")),
        }
        exchanges.append({"request": request, "response": response})
    doc: dict[str, Any] = {
        "description": f"Recorded from a run of {skill.package.name}#{method_name}.",
        "method": method_name,
        "inputs": inputs,
    }
    if credentials:
        doc["setup"] = {"credentials": credentials}
    hosted = {k: v for k, v in host.items() if v}
    if hosted:
        doc["host"] = hosted
    if exchanges:
        doc["providers"] = {"http": exchanges}
    expect: dict[str, Any] = {"status": env.get("status")}
    if env.get("outcome"):
        expect["outcome"] = env["outcome"]
    if env.get("status") == "sealed":
        expect["output"] = {"exact": env.get("result")}
    if env.get("receipt_id"):
        expect["receipt"] = "verified"
    doc["expect"] = expect
    cleaned: dict[str, Any] = json.loads(clean(json.dumps(doc)))
    return cleaned


def _files_read(calls: list[Any]) -> dict[str, str]:
    """The workspace files the run read whole before changing them, as it read them: the
    replay stages them so its reads see what the recorded run saw."""
    staged: dict[str, str] = {}
    touched: set[str] = set()
    for call in calls:
        settled: dict[str, Any] = call.result if isinstance(call.result, dict) else {}
        inner = settled.get("result")
        result: dict[str, Any] = inner if isinstance(inner, dict) else {}
        path = result.get("path")
        if not isinstance(path, str):
            continue
        content = result.get("content")
        whole = settled.get("status") == "completed" and not result.get("truncated")
        first = path not in touched and path not in staged
        if call.tool == "fs.read" and first and whole and isinstance(content, str):
            staged[path] = content
        touched.add(path)
    return staged


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # the strict loader refuses anchors and aliases


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # A file's text reads as written: multi-line strings as literal blocks.
    style = "|" if "\n" in value.rstrip("\n") or value.endswith("\n") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def _dump(doc: dict[str, Any]) -> str:
    return "# Recorded by proctor test record; edit freely.\n" + yaml.dump(
        doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100
    )

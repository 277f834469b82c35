"""One run per MCP client session, each call a governed call of that run's agent turn.

What the gateway (:mod:`proctor.mcp.gateway`, upstream MCP tools) and the served core tools
(:mod:`proctor.mcp.core_tools`, ``--tool fs.read``) share. A session's run is a run of a
generated package with one agent step (:data:`TURN`) whose allowance is exactly the served
tools; it opens when the session's first call comes. Each call is then
:meth:`~proctor.runtime.engine.session.Session.turn_call` of that turn: admitted with the
server's authority and the workspace's policy (scope, schema, containment of every path,
the approval floor with the exact arguments, budgets, rate limits), its output checked for
secrets, recorded in the run store and written to the audit log. A change under
``effects: ask`` waits for a person, asked through elicitation as for served skills.

The run seals with a signed receipt when the session ends (the server stops:
:meth:`SessionRuns.seal_all`). A server that is killed leaves its sessions' runs paused on the
turn; each open run is named by a file in ``.proctor/mcp-sessions/`` holding the lease-holder
id of the process that serves it, and the next ``proctor mcp`` started in the workspace seals
every run whose process is gone (:func:`seal_orphans`); a person may also close one with
``proctor resume RUN_ID -`` and ``{"close": {"outcome": "superseded"}}``.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
import mcp_types as types

from proctor.errors import ProctorError
from proctor.mcp.approvals import ApprovalRelay
from proctor.mcp.session_markers import RUN_ID, forget_open, holder_of, mark_open, open_folder
from proctor.mcp.shared import PoolBusy, ServerConfig, TurnHost

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext

    from proctor.runtime.engine.session import Session

__all__ = [
    "TURN",
    "SessionHost",
    "SessionRuns",
    "error",
    "seal_orphans",
    "session_key",
    "session_package",
]

T = TypeVar("T")
TURN = "serve"
WAIT_POLL = 0.25
BUSY_WAIT = 60.0
_ENDED = frozenset({"run_sealed", "unknown_address"})
"""What a call answers when its session's run no longer waits on the turn."""


class SessionHost(TurnHost, Protocol):
    """What a session's calls use of the server dispatching to them."""

    config: ServerConfig
    approvals: ApprovalRelay

    def run_on_loop(self, fn: Callable[[threading.Event], T]) -> T: ...


def session_package(
    root: Path, kind: str, name: str, tools: list[str], texts: tuple[str, str, str]
) -> Path:
    """Write the package of a session run whose turn may call exactly ``tools`` (one folder per
    distinct tool set, under ``.proctor/<kind>/``). ``texts``: the package's description, the
    method's and the turn's instructions (plain YAML scalars).

    A file that already holds its text is not written again: a session's calls keep the
    package they loaded only while its files are as they were, and not changed within the
    last moments (:mod:`proctor.runtime.engine.held_skills`), so a server started again in the
    workspace keeps it from its first call rather than reading it again for a while."""
    description, method, instructions = texts
    from proctor.receipts.canonical import digest

    parts = (kind, digest(sorted(tools))[7:23])
    skill_md = f"---\nname: {name}\ndescription: {description}\n---\n"
    allowance = json.dumps(sorted(tools))
    run_yaml = (
        "minimum_proctor: 0.1.0\n"
        "default_method: session\n"
        "methods:\n"
        "  session:\n"
        f"    description: {method}\n"
        "    inputs: {type: object, properties: {client: {type: string}}}\n"
        "    steps:\n"
        f"      - id: {TURN}\n"
        "        agent:\n"
        f"          instructions: {instructions}\n"
        "          inputs: {client: $input.client}\n"
        f"          calls: {{tools: {allowance}}}\n"
        "          output:\n"
        "            type: object\n"
        "            properties: {calls: {type: integer}}\n"
        "            required: [calls]\n"
    )
    folder = _state_folder(root, parts)
    try:
        _write_changed(folder, "SKILL.md", skill_md)
        _write_changed(folder, "run.yaml", run_yaml)
    finally:
        os.close(folder)
    return root.joinpath(".proctor", *parts)


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _state_folder(root: Path, parts: tuple[str, ...]) -> int:
    """A descriptor of ``.proctor/<parts...>``, each folder made when absent and opened
    without following a link; a link (or a file) found at a step is replaced by a folder of
    proctor's own, so nothing written under it lands outside the workspace's state.

    Raises:
        ProctorError: ``state_unusable``: ``.proctor`` itself is no plain folder, or a step
            cannot be made.
    """
    try:
        at = os.open(root / ".proctor", _FOLDER)
    except OSError as exc:
        raise ProctorError(
            f"the workspace's .proctor is not a folder proctor can use ({exc.strerror})",
            code="state_unusable",
        ) from exc
    for part in parts:
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o700, dir_fd=at)
            try:
                inner = os.open(part, _FOLDER, dir_fd=at)
            except OSError:  # a link or a file where the folder goes: ours to replace
                os.unlink(part, dir_fd=at)
                os.mkdir(part, 0o700, dir_fd=at)
                inner = os.open(part, _FOLDER, dir_fd=at)
        except OSError as exc:
            os.close(at)
            raise ProctorError(
                f"proctor could not make .proctor/{part} ({exc.strerror})", code="state_unusable"
            ) from exc
        os.close(at)
        at = inner
    return at


def _write_changed(folder: int, name: str, text: str) -> None:
    """Write ``text`` to the file ``name`` of ``folder`` (a descriptor) unless it is a plain
    file holding exactly that text already; a link there is replaced, never followed."""
    data = text.encode("utf-8")
    with contextlib.suppress(OSError):
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        try:
            if os.read(fd, len(data) + 1) == data:
                return
        finally:
            os.close(fd)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, 0o600, dir_fd=folder)
    except OSError:  # a link (ELOOP) or another kind of entry there: replaced by the file
        os.unlink(name, dir_fd=folder)
        fd = os.open(name, flags, 0o600, dir_fd=folder)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def session_key(ctx: ServerRequestContext[Any, Any], transport: str) -> tuple[str, ...]:
    """The client session a call belongs to: its run is the session's run.

    The SDK builds a request's ``ctx.session`` afresh for every request (and on the 2026-07-28
    protocol a connection too), so neither names a client session. Over stdio the process
    serves one client: every call is its session's. Over streamable HTTP a session is the
    ``Mcp-Session-Id`` the transport gave (the handshake protocol); the stateless protocol has
    none, so a client there is its bearer key's token id and the name it gives in its
    ``clientInfo``.
    """
    if transport == "stdio":
        return ("stdio",)
    request = ctx.request
    headers = getattr(request, "headers", None)
    session_id = None if headers is None else headers.get("mcp-session-id")
    if session_id:
        return ("http-session", str(session_id)[:200])
    scope = getattr(request, "scope", None)
    token = scope.get("proctor.token_id") if isinstance(scope, Mapping) else None
    params = ctx.session.client_params
    client = "" if params is None or params.client_info is None else params.client_info.name
    return ("http-client", str(token or ""), str(client)[:200])


def error(code: str, message: str) -> types.CallToolResult:
    """A tool error ``error[code]: message`` (the message scrubbed of secrets)."""
    from proctor.runtime.boundary.sanitize import scrub_text

    return types.CallToolResult(
        content=[types.TextContent(text=f"error[{code}]: {scrub_text(message)}")], is_error=True
    )


class SessionRuns:
    """The run of each client session over one package, and the calls made in them."""

    def __init__(self, package: Path) -> None:
        self.package = package
        self.runs: dict[tuple[str, ...], str] = {}  # client session (session_key) -> run id
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()
        self._opening = threading.Lock()  # one run per session, even when its first calls race

    def _run_of(
        self, ctx: ServerRequestContext[Any, Any], host: SessionHost, key: tuple[str, ...]
    ) -> str:
        with self._opening:
            with self._lock:
                found = self.runs.get(key)
            if found is not None:
                return found
            return self._open_run(ctx, host, key)

    def _open_run(
        self, ctx: ServerRequestContext[Any, Any], host: SessionHost, key: tuple[str, ...]
    ) -> str:
        client = ""
        params = ctx.session.client_params
        if params is not None and params.client_info is not None:
            client = str(params.client_info.name)[:200]

        def start(session: Session) -> str:
            envelope = session.run(
                str(self.package), inputs={"client": client}, authority=host.config.authority
            )
            if envelope.run_id is None or envelope.status != "needs_agent":
                raise ProctorError(
                    f"the session's run did not open ({envelope.status})",
                    code="session_run_not_opened",
                )
            mark_open(host.config.workspace.root, envelope.run_id, session.holder)
            return envelope.run_id

        run_id = host.pool.use(start)
        with self._lock:
            self.runs[key] = run_id
        host.config.runs[run_id] = None
        return run_id

    async def call(
        self,
        ctx: ServerRequestContext[Any, Any],
        host: SessionHost,
        tool: str,
        arguments: dict[str, Any],
        client: Mapping[str, Any] | None = None,
        *,
        on_loop: bool = False,
        line: list[dict[str, Any]] | None = None,
    ) -> Any:
        """One client call of ``tool``: admitted as a call of the session run's turn; a change
        waits for a person's decision (``client``: the client's name and version, for the
        audit log). ``on_loop``: a quick read, made on the event loop's thread when the
        session's run is open, a session is free and the run is not held
        (:meth:`~proctor.mcp.server.ProctorServer.run_on_loop`); on a worker otherwise, as
        every other call. Returns the call's outcome
        (:class:`~proctor.runtime.engine.turn_calls.CallOutcome`), or a tool error when the
        session's run cannot be opened, the call is refused before it is admitted, or it still
        waits for a person (``approval_pending``).

        ``line``: the request's ``mcp_request`` fields while no one has written them (a list
        of one, emptied by the writer): the session that makes the call writes them just
        before it, so the line and the call's own are one writer's (which then need not read
        the log back to chain them); a call that opens the session's run has it written
        first, by ``host``. Left in the list when no session made the call: the caller
        writes it then."""
        key = session_key(ctx, host.config.transport)
        with self._lock:  # the session's run, once it has one, without a thread hop
            known = self.runs.get(key)
        if known is None and line:  # before the run's own lines
            host.audit("mcp_request", **line.pop())
        try:
            run_id: str = (
                known
                if known is not None
                else await anyio.to_thread.run_sync(lambda: self._run_of(ctx, host, key))
            )
        except ProctorError as exc:
            return error(exc.code, exc.message)
        with self._lock:
            n = self.calls[run_id] = self.calls.get(run_id, 0) + 1
        made = _Made(run_id, tool, arguments, f"c{n}", line)
        try:
            outcome: Any = _NOT_MADE
            if on_loop and known is not None:
                outcome = host.run_on_loop(_at_once(host, made))
            if outcome is _NOT_MADE:  # a worker waits for the session or the run
                outcome = await host.run_in_worker(_once(host, made))
        except ProctorError as exc:
            if exc.code not in _ENDED or known is None:
                return error(exc.code, exc.message)
            # the session's run was sealed under it (a person closed it, a client completed
            # its turn): the session goes on in a new run
            with self._lock:
                if self.runs.get(key) == run_id:
                    del self.runs[key]
            forget_open(host.config.workspace.root, run_id)
            return await self.call(ctx, host, tool, arguments, client, line=line)
        if outcome.error and outcome.error.get("code") == "approval_pending":
            details = outcome.error.get("details") or {}
            address = str(details.get("address") or "")
            digest = str(details.get("request_digest") or "")
            await self._ask(ctx, host, run_id, address, client)
            decided = await self._decided(host, run_id, address, digest)
            if not decided:
                return error(
                    "approval_pending",
                    f"{tool} waits for a person's approval at {address} of run {run_id}"
                    " (proctor approve, or the console); nothing was done",
                )
            try:
                outcome = await host.run_in_worker(_once(host, made))
            except ProctorError as exc:
                return error(exc.code, exc.message)
        return outcome

    async def _ask(
        self,
        ctx: ServerRequestContext[Any, Any],
        host: SessionHost,
        run_id: str,
        address: str,
        client: Mapping[str, Any] | None,
    ) -> None:
        """Relay the approval to the client as served skills do (elicitation; a form answer
        counts only under ``--trust-client-approvals``)."""

        def envelope(session: Session) -> dict[str, Any]:
            return session.envelope(run_id).to_json()

        doc = await anyio.to_thread.run_sync(lambda: host.pool.use(envelope))
        doc["requests"] = [r for r in doc.get("requests") or [] if r.get("address") == address]
        if not ctx.session.can_send_request:
            return
        try:
            await host.approvals.relay(ctx, doc, host, client)
        except Exception:  # a client that cannot answer leaves the decision to a person
            return

    async def _decided(self, host: SessionHost, run_id: str, address: str, digest: str) -> bool:
        """Wait (reporting progress) until the request is no longer open; False after the
        relay's wait bound."""

        def check(session: Session) -> bool:
            return not any(
                r.address == address and r.request_digest == digest and r.state == "open"
                for r in session.store.requests(run_id)
            )

        with anyio.move_on_after(host.approvals.wait_seconds):
            while True:
                if await anyio.to_thread.run_sync(lambda: host.pool.use(check)):
                    return True
                await anyio.sleep(WAIT_POLL)
        return False

    def seal_all(self, host: SessionHost) -> None:
        """End each session's run: its turn answered with the number of calls, sealed with a
        receipt (a run still waiting on a person is closed ``superseded``)."""
        with self._lock:
            runs = list(self.runs.values())
            self.runs.clear()
        for run_id in runs:
            calls = self.calls.get(run_id, 0)
            try:
                host.pool.use(partial(_seal, run_id=run_id, calls=calls))
            except ProctorError as exc:
                host.audit("mcp_session_seal_failed", run_id, code=exc.code)


_NOT_MADE = object()
"""What :func:`_at_once` answers when the call cannot be made without waiting."""


class _Made:
    """One client call of a core tool as a pool's session makes it (:meth:`SessionRuns.call`):
    the request's ``mcp_request`` line (``line``, a list of one while no one has written it)
    first, with that session's log, then the turn call."""

    def __init__(
        self,
        run_id: str,
        tool: str,
        arguments: dict[str, Any],
        call_id: str,
        line: list[dict[str, Any]] | None,
    ) -> None:
        self.run_id, self.tool, self.arguments, self.call_id = run_id, tool, arguments, call_id
        self.line = line

    def by(self, stop: threading.Event) -> Callable[[Session], Any]:
        """The call, for :meth:`SessionPool.use`, stopped by ``stop``."""

        def go(session: Session) -> Any:
            if self.line:
                emit = session.audit.emit
                emit("mcp_request", run_id=None, step_index=None, **self.line.pop())
            return session.turn_call(
                self.run_id, TURN, self.tool, self.arguments, self.call_id, stop=stop
            )

        return go


def _at_once(host: SessionHost, made: _Made) -> Callable[[threading.Event], Any]:
    """The call made now, or :data:`_NOT_MADE` when every session is in use or the run is held
    (a person's decision drives it on): nothing of it was admitted or recorded then, and a
    worker makes it (:func:`_once`), waiting as long as that takes."""

    def at_once(stop: threading.Event) -> Any:
        try:
            return host.pool.use(made.by(stop), blocking=False)
        except PoolBusy:
            return _NOT_MADE
        except ProctorError as exc:
            if exc.code != "run_busy":
                raise
            return _NOT_MADE

    return at_once


def _once(host: SessionHost, made: _Made) -> Callable[[threading.Event], Any]:
    def once(stop: threading.Event) -> Any:
        go = made.by(stop)
        # a person's decision drives the run on in its own process, holding the run's lease
        # for a moment: the call waits for it rather than failing run_busy
        deadline = time.monotonic() + BUSY_WAIT
        while True:
            try:
                return host.pool.use(go)
            except ProctorError as exc:
                if exc.code != "run_busy" or time.monotonic() > deadline or stop.is_set():
                    raise
            stop.wait(WAIT_POLL)

    return once


def _seal(session: Session, *, run_id: str, calls: int | None) -> None:
    seal_session_run(session, run_id, calls)


def seal_session_run(session: Session, run_id: str, calls: int | None = None) -> None:
    """Seal one session's run: its turn answered ``{calls}`` (by default the calls the run
    store recorded in it), or closed ``superseded`` when it waits on anything else. A run
    already sealed is left as it is. Its open-run file is removed either way.

    Raises:
        ProctorError: what :meth:`~proctor.runtime.engine.session.Session.resume` refuses.
    """
    envelope = session.envelope(run_id).to_json()
    if envelope.get("status") != "sealed":
        turn = next((r for r in envelope.get("requests") or [] if r.get("address") == TURN), None)
        if envelope.get("status") != "needs_agent" or turn is None:
            session.resume(run_id, {"close": {"outcome": "superseded"}})
        else:
            if calls is None:
                calls = len(session.store.step_calls(run_id, TURN))
            answer = {"request_digest": turn["request_digest"], "value": {"calls": calls}}
            session.resume(run_id, {"answers": {TURN: answer}})
    forget_open(session.workspace.root, run_id)


def seal_orphans(host: SessionHost) -> list[str]:
    """Seal the session runs a ``proctor mcp`` process left open when it died (its lease-holder
    id names a process of this host that is gone): each is sealed as the session's end would
    have sealed it, audited ``mcp_session_run_sealed`` (``orphaned: true``). A run served by a
    live process, or by another host, is left alone; one that cannot be sealed is audited
    ``mcp_session_seal_failed`` with its code and left for the next start. Returns the runs
    sealed."""
    from proctor.runtime.engine.lease import holder_dead

    root = host.config.workspace.root
    folder = open_folder(root, make=False)
    if folder is None:
        return []
    try:
        names = sorted(n for n in os.listdir(folder) if RUN_ID.fullmatch(n))
        holders = {n: holder_of(folder, n) for n in names}
    finally:
        os.close(folder)
    sealed = []
    for name in names:
        holder = holders[name]
        if holder is None or not holder_dead(holder):
            continue
        try:
            host.pool.use(partial(_seal, run_id=name, calls=None))
        except ProctorError as exc:
            if exc.code == "run_not_found":
                forget_open(root, name)
            else:
                host.audit("mcp_session_seal_failed", name, code=exc.code)
            continue
        host.audit("mcp_session_run_sealed", name, orphaned=True)
        sealed.append(name)
    return sealed

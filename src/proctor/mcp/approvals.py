"""Approvals over MCP elicitation, without letting the client approve its own calls.

An MCP client is the agent's side: any client can declare the elicitation capability and
answer "accept", so what it relays is not a person's decision. When a served call pauses on
a person's request:

- a client that supports URL-mode elicitation, on a server given ``--console-url``, is sent
  to the console page of exactly that request; the person signs in there and decides, bound
  to the digest, and the call waits (with progress notifications) until the run no longer
  waits on it, then returns the run's envelope;
- a form-mode "accept" counts as an approval only when the operator opted in for this server
  (``proctor mcp --trust-client-approvals``): it is then recorded, audited and receipted as
  ``client-relayed:CLIENT``; otherwise it is audited as information and the request stays
  pending for a person (``proctor approve``, the console);
- a connection that cannot carry server-to-client requests (the newer protocol revisions on
  stateless HTTP) gets the paused envelope with a note naming where a person decides.

Long calls report progress every :data:`PROGRESS_EVERY` seconds, so clients that time out
requests without progress keep waiting.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import mcp_types as types
from mcp.shared.message import ServerMessageMetadata

from proctor.contracts.values import dataclass
from proctor.errors import ProctorError, UsageError
from proctor.mcp.next_steps import console_page, where_decided

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext

    from proctor.mcp.shared import TurnHost
    from proctor.runtime.engine.session import Session

__all__ = [
    "PROGRESS_EVERY",
    "ApprovalRelay",
    "answers_from_form",
    "console_page",
    "question_schema",
    "with_progress",
]

T = TypeVar("T")
PROGRESS_EVERY = 5.0
WAIT_POLL = 0.25
MESSAGE_MAX = 6000
APPROVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Approve exactly what is shown above",
        }
    },
    "required": ["approve"],
}


async def with_progress(
    ctx: ServerRequestContext[Any, Any],
    work: Awaitable[T],
    message: str = "working",
    *,
    every: float = PROGRESS_EVERY,
) -> T:
    """Await ``work`` while reporting progress every ``every`` seconds (a no-op for a client
    that sent no progress token)."""

    async def tick() -> None:
        count = 0
        while True:
            await anyio.sleep(every)
            count += 1
            try:
                await ctx.session.report_progress(float(count), None, message)
            except Exception:  # the client is gone or the channel closed: stop reporting
                return

    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        result = await work
        group.cancel_scope.cancel()
    return result


def question_schema(request: Mapping[str, Any]) -> dict[str, Any]:
    """The form a client shows for a question request: per question with options, a
    single-select of titled choices (``oneOf`` of ``{const, title}``: the label, its detail,
    the recommended one marked); per question with free text, a text field (``ID_text`` beside
    options, else ``ID`` alone). A question is required only where nothing but one field can
    answer it."""
    from proctor.core.resume import options_of

    properties: dict[str, Any] = {}
    required: list[str] = []
    for q in request.get("questions") or []:
        if not isinstance(q, Mapping):
            continue
        qid, prompt = str(q.get("id")), str(q.get("prompt"))
        options = options_of(q)
        if options:
            choices = []
            for o in options:
                title = o["label"] + (f" — {o['detail']}" if o["detail"] else "")
                title += " (recommended)" if o["recommended"] else ""
                choices.append({"const": o["label"], "title": title[:500]})
            properties[qid] = {"type": "string", "title": prompt[:500], "oneOf": choices}
            if q.get("free_text"):
                properties[f"{qid}_text"] = {
                    "type": "string",
                    "title": "or in your own words",
                    "maxLength": 4000,
                }
            elif q.get("required", True):
                required.append(qid)
        else:
            properties[qid] = {"type": "string", "title": prompt[:500], "maxLength": 4000}
            if q.get("required", True):
                required.append(qid)
    return {"type": "object", "properties": properties, "required": required}


def answers_from_form(request: Mapping[str, Any], content: Mapping[str, Any]) -> dict[str, Any]:
    """A form's content as question answers (``{ID: {option?, text?}}``); what the form left
    empty is left out (admission refuses a required question unanswered)."""
    from proctor.core.resume import option_labels

    out: dict[str, Any] = {}
    for q in request.get("questions") or []:
        if not isinstance(q, Mapping):
            continue
        qid = str(q.get("id"))
        labels = option_labels(q)
        answer: dict[str, Any] = {}
        chosen = content.get(qid)
        text = content.get(f"{qid}_text") if labels else chosen
        if labels and isinstance(chosen, str) and chosen:
            answer["option"] = chosen
        if isinstance(text, str) and text.strip():
            answer["text"] = text
        if answer:
            out[qid] = answer
    return out


def _payload_text(request: Mapping[str, Any]) -> str:
    """What a request carries, as plain text for a client to show."""
    lines = [f"{request.get('kind')} at {request.get('address')}"]
    if request.get("tool"):
        lines.append(f"tool: {request['tool']}")
    if request.get("reason"):
        lines.append(f"reason: {request['reason']}")
    payload = request.get("payload") or {}
    for change in payload.get("files") or []:
        lines.append(f"{change.get('op')} {change.get('path')}")
        lines.append(str(change.get("diff") or ""))
    if isinstance(payload.get("command"), dict):
        lines.append("argv: " + json.dumps(payload["command"].get("argv")))
        lines.append(f"cwd: {payload['command'].get('cwd')}")
    if isinstance(payload.get("call"), dict):
        lines.append(json.dumps(payload["call"], indent=2, ensure_ascii=False))
    for q in request.get("questions") or []:
        if isinstance(q, Mapping):
            lines.append(f"? {q.get('prompt')}")
    lines.append(f"request digest: {request.get('request_digest')}")
    text = "\n".join(lines)
    return text if len(text) <= MESSAGE_MAX else text[: MESSAGE_MAX - 1] + "…"


@dataclass
class ApprovalRelay:
    """How this server relays a paused call's approval requests to its client.

    Attributes:
        console_url: the console's origin (``proctor serve``), for URL-mode elicitation.
        trust_client_approvals: the operator's opt-in: a form-mode accept approves.
        wait_seconds: how long a URL-mode call waits for the person before it returns the
            paused envelope.
    """

    console_url: str | None = None
    trust_client_approvals: bool = False
    wait_seconds: float = 900.0

    def _where(self, run_id: str, address: str) -> str:
        return where_decided(self.console_url, run_id, address)

    def _elicitation(
        self, ctx: ServerRequestContext[Any, Any], run_id: str, request: Mapping[str, Any]
    ) -> types.ElicitRequestParams | None:
        """What to ask the client, by the modes it declared: URL mode when a console is
        configured, else form mode (``elicitation: {}`` declares form mode); ``None`` when it
        declared no elicitation, or only URL mode on a server without a console."""
        caps = ctx.session.client_capabilities
        elicit = caps.elicitation if caps is not None else None
        address = str(request.get("address"))
        if elicit is None:
            return None
        if elicit.url is not None and self.console_url:
            return types.ElicitRequestURLParams(
                message=f"A person approves or declines {request.get('tool') or 'this step'}"
                f" at {address} in the proctor console (sign in there; the call continues"
                " once it is decided).",
                url=console_page(self.console_url, run_id, address),
                elicitation_id=f"{run_id}:{address}",
            )
        # an empty declaration (``elicitation: {}``) is form mode, as the specification says
        # for clients written before the modes were named (and the TypeScript SDK reads it)
        if elicit.form is None and elicit.url is not None:
            return None
        text = _payload_text(request)
        if not self.trust_client_approvals:
            text += (
                "\n\nYour answer is shown to proctor as information only: a person approves at "
                + self._where(run_id, address)
            )
        schema = APPROVE_SCHEMA if request.get("kind") == "approval" else question_schema(request)
        return types.ElicitRequestFormParams(message=text, requested_schema=schema)

    async def relay(
        self,
        ctx: ServerRequestContext[Any, Any],
        doc: dict[str, Any],
        host: TurnHost,
        client: Mapping[str, Any] | None,
    ) -> dict[str, Any] | types.InputRequiredResult:
        """Relay the first approval ``doc`` (a paused envelope) waits on.

        On a connection that carries server-to-client requests the elicitation is sent now
        and the envelope the call returns is the run driven on, or still paused with a note.
        On the newer revisions without that channel it is the SDK's return-based flow: an
        ``input_required`` result whose sealed state names the run and the request; the
        client's retry comes back through :meth:`resume`.
        """
        requests = [
            r for r in doc.get("requests") or [] if r.get("kind") in ("approval", "question")
        ]
        run_id = doc.get("run_id")
        if not requests or not isinstance(run_id, str):
            return doc
        request = requests[0]
        address = str(request.get("address"))
        params = self._elicitation(ctx, run_id, request)
        if params is None:
            return _noted(doc, f"a person decides {address} at {self._where(run_id, address)}")
        if not ctx.session.can_send_request:
            state = {
                "run_id": run_id,
                "address": address,
                "request_digest": request.get("request_digest"),
                "mode": params.mode,
            }
            return types.InputRequiredResult(
                input_requests={"approval": types.ElicitRequest(params=params)},
                request_state=json.dumps(state, sort_keys=True),
            )
        answer = await ctx.session.send_request(
            types.ElicitRequest(params=params),
            types.ElicitResult,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
        return await self._answered(ctx, doc, host, request, params.mode, answer, client)

    async def resume(
        self,
        ctx: ServerRequestContext[Any, Any],
        state_text: str,
        responses: Mapping[str, Any] | None,
        host: TurnHost,
        client: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """The client's retry of a call that returned ``input_required`` (its state was
        minted by :meth:`relay` and verified by the SDK's request-state boundary).

        Raises:
            UsageError: ``input_state_invalid`` (not a state this server minted).
        """
        try:
            state = json.loads(state_text)
            run_id, address = str(state["run_id"]), str(state["address"])
            mode = str(state["mode"])
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError("the retried call's state is not this server's",
                             code="input_state_invalid") from exc  # fmt: skip

        def current(session: Session) -> dict[str, Any]:
            return session.envelope(run_id).to_json()

        doc = await anyio.to_thread.run_sync(lambda: host.pool.use(current))
        request = next(
            (r for r in doc.get("requests") or [] if r.get("address") == address),
            {"address": address, "request_digest": state.get("request_digest")},
        )
        raw: Any = (responses or {}).get("approval")
        if hasattr(raw, "model_dump"):
            raw = raw.model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            answer = types.ElicitResult.model_validate(raw)
        except ValueError:
            answer = types.ElicitResult(action="cancel")
        if doc.get("status") == "sealed":
            return doc
        return await self._answered(ctx, doc, host, request, mode, answer, client)

    async def _answered(
        self,
        ctx: ServerRequestContext[Any, Any],
        doc: dict[str, Any],
        host: TurnHost,
        request: Mapping[str, Any],
        mode: str,
        answer: types.ElicitResult,
        client: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        run_id = str(doc.get("run_id"))
        address = str(request.get("address"))
        digest = str(request.get("request_digest"))
        where = self._where(run_id, address)
        name = str((client or {}).get("name") or "unnamed-client")[:64]
        if mode == "url":
            host.audit("mcp_elicitation_url", run_id, address=address, url=where,
                       action=answer.action, client=name)  # fmt: skip
            if answer.action != "accept":
                return _noted(
                    doc, f"the client did not open the console; a person decides at {where}"
                )
            with anyio.move_on_after(self.wait_seconds):
                return await with_progress(
                    ctx, self._decided(host, run_id, address, digest), f"waiting for {where}"
                )
            return _noted(doc, f"no decision yet; a person decides at {where}")
        content = answer.content or {}
        answers = None
        if request.get("kind") == "question":
            answers = answers_from_form(request, content) if answer.action == "accept" else None
            approve = answers is not None
        else:
            approve = answer.action == "accept" and content.get("approve") is True
        if not self.trust_client_approvals or answer.action != "accept":
            host.audit("mcp_client_answer_ignored", run_id, address=address,
                       action=answer.action, approve=approve, client=name,
                       trusted=self.trust_client_approvals)  # fmt: skip
            return _noted(doc, f"the client's answer changed nothing; a person decides at {where}")
        host.audit("mcp_client_approval_trusted", run_id, address=address, approve=approve,
                   client=name)  # fmt: skip
        from proctor.runtime.engine.approvals import decide

        def go(session: Session) -> dict[str, Any] | ProctorError:
            try:
                envelope = decide(session, run_id, address, request_digest=digest,
                                  approve=approve, decided_by=f"client-relayed:{name}",
                                  answers=answers)  # fmt: skip
            except ProctorError as exc:
                return exc
            return envelope.to_json()

        out = await with_progress(ctx, host.run_in_worker(lambda _stop: host.pool.use(go)))
        if isinstance(out, ProctorError):
            return _noted(doc, f"the relayed approval was refused [{out.code}]: {out.message}")
        return out

    async def _decided(
        self, host: TurnHost, run_id: str, address: str, digest: str
    ) -> dict[str, Any]:
        """Wait until the run no longer waits on the request; then its envelope."""

        def check(session: Session) -> dict[str, Any] | None:
            record = session.store.get_run(run_id)
            if record is None:
                return None
            waiting = any(
                r.address == address and r.request_digest == digest and r.state == "open"
                for r in session.store.requests(run_id)
            )
            if record.status != "sealed" and (waiting or record.status == "running"):
                return None
            return session.envelope(run_id).to_json()

        while True:
            found = await anyio.to_thread.run_sync(lambda: host.pool.use(check))
            if found is not None:
                return found
            await anyio.sleep(WAIT_POLL)


def _noted(doc: dict[str, Any], note: str) -> dict[str, Any]:
    return {**doc, "notes": [*(doc.get("notes") or []), note]}

"""Turn tools: work the agent turns of paused runs call by call over MCP.

Served scoped to one run (``proctor mcp --run RUN_ID``) or beside skills, for the runs the
server's own calls opened; a run outside that scope is refused as if it did not exist. Built on
the driver's turn API (``docs/driver-api.md``): ``Session.envelope``, ``Session.turn_call`` and
``Session.resume``. A turn is addressed by its step id (``turn``), with ``run`` naming the run
when the server holds more than one.

- ``turn_list``: every run in scope, its status, and each open request as one line.
- ``turn_status``: a turn's instructions and inputs whole, the calls it may make with their
  input schemas, its output schema, and its context as an index of locators (type, size;
  never data): ``instructions``, ``input:<name>``, ``call:<call_id>``.
- ``turn_read``: what a locator names, a string as it is and anything else as JSON, in pages
  of at most 32,000 characters with ``next_offset``.
- ``turn_call``: one call from the turn's allowance, admitted like any other; the host pins
  ``call_id`` and a repeat returns the recorded call without running it again. A directive
  run's turn also takes the reference kernel's tool names (``read_file``, ``list_dir``,
  ``write_file`` ...) with their arguments, mapped as a managed directive turn maps them
  (:data:`proctor.runtime.agents.views.REFERENCE_VIEW`); ``turn_status`` lists both names.
- ``turn_complete``: ends the turn with its output, or with ``failure: {reason}`` (the step
  fails with that reason), and drives the run to its next pause or seal.
- ``call_cancel``: cancels a turn call this server is executing (see :meth:`TurnTools.cancel`).
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import mcp_types as types

from proctor.errors import ProctorError, UsageError
from proctor.mcp.annotations import TURN_ANNOTATIONS
from proctor.mcp.next_steps import held_call
from proctor.mcp.shared import ServerConfig, TurnHost, error_result, run_content
from proctor.mcp.turn_declarations import PAGE_LIMIT, TOOLS, check_arguments

if TYPE_CHECKING:
    from proctor.runtime.engine.session import Session
    from proctor.runtime.records.runs import CallRecord

__all__ = ["OUTPUT_RETRIES", "PAGE_LIMIT", "TurnTools", "check_arguments", "turn_tools"]

OUTPUT_RETRIES = 2
"""How often ``turn_complete`` refuses an output failing the schema before the step fails."""
Args = dict[str, Any]


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _shown_call(call: CallRecord) -> dict[str, Any]:
    return {"tool": call.tool, "state": call.state, "outcome": call.outcome, "result": call.result}


def _type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}.get(
        type(value), "object"
    )


class TurnTools:
    """The six turn tools over the driver's turn API.

    ``in_flight`` maps ``(run, turn/call_id)`` to the stop event of a turn call this server is
    executing, so ``call_cancel`` can reach it.
    """

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.in_flight: dict[tuple[str, str], threading.Event] = {}
        self.cancelled: set[tuple[str, str]] = set()
        self.output_tries: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    # -- declarations ----------------------------------------------------------------------

    def tool_list(self) -> list[types.Tool]:
        """The turn tools' declarations."""
        return [
            types.Tool(
                name=name,
                description=desc,
                input_schema=schema,
                annotations=types.ToolAnnotations.model_validate(TURN_ANNOTATIONS[name]),
            )
            for name, (desc, schema) in TOOLS.items()
        ]

    def serves(self, name: str) -> bool:
        """Whether ``name`` is a turn tool."""
        return name in TOOLS

    def check_run(self, run_id: str, proctor: TurnHost) -> None:
        """Refuse a ``--run`` naming a run this workspace does not hold.

        Raises:
            UsageError: ``run_not_found``.
        """
        proctor.pool.use(lambda s: s.envelope(run_id))

    # -- scope -----------------------------------------------------------------------------

    def scope(self) -> list[str]:
        """The runs this server may work, in the order they were opened."""
        if self.config.run_scope is not None:
            return [self.config.run_scope]
        return list(self.config.runs)

    def _run_for(self, session: Session, arguments: dict[str, Any], turn: str | None) -> str:
        runs = self.scope()
        named = arguments.get("run")
        if named is not None:
            if named not in runs:
                raise UsageError(
                    f"run {str(named)[:80]!r} is not one this server works", code="run_not_served"
                )
            return str(named)
        if len(runs) == 1:
            return runs[0]
        if not runs:
            raise UsageError("name the run: this server works no run yet", code="run_not_served")
        # only runs that wait are candidates; among them, those waiting at the turn (or on a
        # call of it, ``turn/...``) first: a finished run never makes the choice ambiguous
        open_at = {r: [q.get("address") for q in session.envelope(r).requests or []] for r in runs}
        waiting = [r for r in runs if open_at[r]]
        if turn is not None:
            at = [
                r
                for r in waiting
                if any(a == turn or str(a).startswith(f"{turn}/") for a in open_at[r])
            ]
            waiting = at or waiting
        if len(waiting) == 1:
            return waiting[0]
        if not waiting:
            raise UsageError(
                f"none of the {len(runs)} runs this server works waits on anything; name one"
                " with run (turn_list shows them)",
                code="run_not_waiting",
            )
        raise UsageError(
            f"name the run: {len(waiting)} runs this server works wait ({', '.join(waiting)})",
            code="run_ambiguous",
        )

    @staticmethod
    def _turn(session: Session, run_id: str, address: str) -> dict[str, Any]:
        envelope = session.envelope(run_id)
        for request in envelope.requests or []:
            if request.get("address") == address and request.get("kind") == "agent_turn":
                return request
        raise UsageError(
            f"run {run_id} waits on no agent turn at {address[:80]!r}", code="unknown_address"
        )

    @staticmethod
    def _directive_run(session: Session, run_id: str) -> bool:
        from proctor.runtime.directives import is_directive_run

        record = session.store.get_run(run_id)
        return record is not None and is_directive_run(record.data, session.workspace.state_dir)

    @staticmethod
    def _calls(session: Session, run_id: str, turn: dict[str, Any], address: str) -> dict[str, Any]:
        """Every call of the turn at ``address`` by its call id: the calls of the turn's step
        (a page at a time), not of the whole run."""
        prefix = f"{address}/turn/"
        out: dict[str, Any] = {}
        for call in session.store.iter_step_calls(run_id, str(turn.get("step") or address)):
            if call.call_id.startswith(prefix):
                out[call.call_id.removeprefix(prefix)] = _shown_call(call)
        return out

    @staticmethod
    def _call(session: Session, run_id: str, address: str, call_id: str) -> dict[str, Any] | None:
        """One call of the turn at ``address``, read by its key (one row, however long the
        turn), or ``None``."""
        call = session.store.get_call(run_id, f"{address}/turn/{call_id}")
        return None if call is None else _shown_call(call)

    # -- the tools -------------------------------------------------------------------------

    async def call(
        self, name: str, arguments: dict[str, Any], proctor: TurnHost
    ) -> types.CallToolResult:
        """Answer one turn tool call; a refusal is a tool error the client can read.

        Arguments that do not fit the tool's input schema are refused ``arguments_invalid``
        before anything is read (the SDK does not check them).
        """
        try:
            check_arguments(name, arguments)
        except UsageError as exc:
            refused = exc
            proctor.audit("mcp_turn_refused", tool=name, code=refused.code, run_id=None)
            return error_result(refused)

        def work(stop: threading.Event) -> dict[str, Any] | ProctorError:
            def go(session: Session) -> dict[str, Any]:
                handler = getattr(self, "_" + name)
                result: dict[str, Any] = handler(session, arguments, stop)
                return result

            try:
                return proctor.pool.use(go)
            except ProctorError as exc:
                return exc

        outcome = await proctor.run_in_worker(work)
        if isinstance(outcome, ProctorError):
            proctor.audit(
                "mcp_turn_refused", tool=name, code=outcome.code, run_id=arguments.get("run")
            )
            return error_result(outcome)
        failed = bool(outcome.pop("_error", False))
        content = outcome.pop("_content", None)
        text = outcome.pop("_text", None) or _text(outcome)
        return types.CallToolResult(
            content=content or [types.TextContent(text=text)],
            structured_content=outcome,
            is_error=failed,
        )

    def _turn_list(self, session: Session, arguments: Args, _stop: Any) -> Args:
        runs = []
        lines = []
        for run_id in self.scope():
            doc = session.envelope(run_id).to_json()
            requests = [
                {k: r.get(k) for k in ("address", "kind", "request_digest", "reason", "tool")}
                for r in doc.get("requests") or []
            ]
            runs.append(
                {
                    "run": run_id,
                    "skill": doc.get("skill"),
                    "method": doc.get("method"),
                    "status": doc.get("status"),
                    "outcome": doc.get("outcome"),
                    "receipt_id": doc.get("receipt_id"),
                    "result": doc.get("result"),
                    "requests": requests,
                }
            )
            lines.append(
                f"run {run_id} ({doc.get('skill')}#{doc.get('method')}): "
                f"{doc.get('status')} {doc.get('outcome') or ''}".rstrip()
            )
            lines += [f"  {r['address']}: {r['kind']}" for r in requests]
        return {"runs": runs, "_text": "\n".join(lines) or "no runs yet"}

    def _turn_status(
        self, session: Session, arguments: dict[str, Any], _stop: Any
    ) -> dict[str, Any]:
        address = str(arguments["turn"])
        run_id = self._run_for(session, arguments, address)
        turn = self._turn(session, run_id, address)
        tools = session.tools
        allowance = turn.get("allowance") or {}
        # a run's connector operations are described in the turn itself (not session tools)
        ops = {o["name"]: o for o in allowance.get("operation_tools") or [] if isinstance(o, dict)}
        may_call = [
            {
                "tool": name,
                "description": tools[name].description
                if name in tools
                else ops.get(name, {}).get("description"),
                "input_schema": tools[name].schema
                if name in tools
                else ops.get(name, {}).get("input_schema"),
            }
            for name in allowance.get("tools") or []
        ]
        if self._directive_run(session, run_id):
            from proctor.runtime.agents.views import REFERENCE_VIEW

            by_tool = {entry[0]: (ref, entry[2]) for ref, entry in REFERENCE_VIEW.items()}
            for item in may_call:
                if item["tool"] in by_tool:
                    ref, schema = by_tool[item["tool"]]
                    item["reference_tool"] = ref
                    item["reference_input_schema"] = schema
        if turn.get("ask"):  # a person answers; the run waits (proctor.runtime.engine.turn_ask)
            may_call.append(
                {
                    "tool": "ask_human",
                    "description": "Ask the person running this turn a question; the run waits"
                    " for the answer, then the same call_id returns it.",
                    "input_schema": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["question"],
                        "properties": {"question": {"type": "string", "maxLength": 4000}},
                    },
                }
            )
        inputs = turn.get("inputs") or {}
        context = [
            {
                "locator": "instructions",
                "type": "string",
                "size": len(turn.get("instructions") or ""),
            }
        ]
        context += [
            {"locator": f"input:{k}", "type": _type(v), "size": len(_text(v))}
            for k, v in (inputs.items() if isinstance(inputs, dict) else [])
        ]
        calls = self._calls(session, run_id, turn, address)
        context += [
            {
                "locator": f"call:{cid}",
                "type": _type(c["result"]),
                "size": len(_text(c["result"])),
                "tool": c["tool"],
                "outcome": c["outcome"],
            }
            for cid, c in calls.items()
        ]
        return {
            "run": run_id,
            "turn": address,
            "request_digest": turn.get("request_digest"),
            "instructions": turn.get("instructions"),
            "inputs": inputs,
            "calls": may_call,
            "ask": turn.get("ask", False),
            "output_schema": turn.get("output_schema"),
            "context": context,
        }

    def _turn_read(self, session: Session, arguments: Args, _stop: Any) -> Args:
        address = str(arguments["turn"])
        run_id = self._run_for(session, arguments, address)
        turn = self._turn(session, run_id, address)
        locator = str(arguments["locator"])
        inputs = turn.get("inputs") or {}
        kind, _, name = locator.partition(":")
        if locator == "instructions":
            value: Any = turn.get("instructions") or ""
        elif kind == "input" and isinstance(inputs, dict) and name in inputs:
            value = inputs[name]
        elif kind == "call" and (call := self._call(session, run_id, address, name)) is not None:
            value = call["result"]
        else:
            raise UsageError(
                f"turn {address} holds no {locator[:80]!r} (see turn_status for its locators)",
                code="locator_unknown",
            )
        text = _text(value)
        offset = int(arguments.get("offset") or 0)
        limit = min(int(arguments.get("limit") or PAGE_LIMIT), PAGE_LIMIT)
        page = text[offset : offset + limit]
        end = offset + len(page)
        return {
            "run": run_id,
            "turn": address,
            "locator": locator,
            "offset": offset,
            "size": len(text),
            "text": page,
            "next_offset": end if end < len(text) else None,
            "_text": page,
        }

    def _turn_call(self, session: Session, arguments: Args, stop: Any) -> Args:
        address = str(arguments["turn"])
        run_id = self._run_for(session, arguments, address)
        call_id = str(arguments["call_id"])
        key = (run_id, f"{address}/{call_id}")
        named = str(arguments["tool"])
        tool, args = named, dict(arguments.get("args") or {})
        if self._directive_run(session, run_id):
            from proctor.runtime.agents.views import REFERENCE_VIEW

            entry = REFERENCE_VIEW.get(named)
            if entry is not None:  # mapped as a managed directive turn maps its model's calls
                tool, args = entry[0], entry[3](args)
        with self._lock:
            self.in_flight[key] = stop
        try:
            outcome = session.turn_call(
                run_id,
                address,
                tool,
                args,
                call_id,
                reason=str(arguments.get("reason") or ""),
                stop=stop,
            )
        finally:
            with self._lock:
                self.in_flight.pop(key, None)
        cancelled = key in self.cancelled
        # under effects: ask the call waits on a person: the run is needs_approval
        pending = outcome.code == "approval_pending"
        doc = {
            "run": run_id,
            "turn": address,
            "call_id": call_id,
            "tool": outcome.tool,
            **({"reference_tool": named} if named != tool else {}),
            "status": "needs_approval" if pending else outcome.status,
            "result": outcome.result,
            "error": outcome.error,
            "already_done": outcome.already_done,
            "cancel_requested": cancelled,
        }
        summary = f"{outcome.tool} {outcome.status}"
        if pending:
            where = str((outcome.error or {}).get("details", {}).get("address") or address)
            summary = held_call(outcome.tool, run_id, where, self.config.console_url)
        elif outcome.error:
            summary += f" [{outcome.error.get('code')}]: {outcome.error.get('message')}"
        else:
            summary += ": " + _text(outcome.result)[:2_000]
        # a call waiting on a person is a pause, not an error
        return {**doc, "_error": not outcome.ok and not pending, "_text": summary}

    def _turn_complete(
        self, session: Session, arguments: dict[str, Any], stop: Any
    ) -> dict[str, Any]:
        address = str(arguments["turn"])
        run_id = self._run_for(session, arguments, address)
        turn = self._turn(session, run_id, address)
        if ("output" in arguments) == ("failure" in arguments):
            raise UsageError(
                "turn_complete takes output, or failure: {reason}, exactly one",
                code="turn_complete_invalid",
            )
        entry: dict[str, Any] = {"request_digest": turn["request_digest"]}
        if "output" in arguments:
            self._check_output(run_id, address, turn, arguments["output"])
        if "failure" in arguments:
            # the turn's failure lane: the step fails with the (scrubbed) reason, sealed
            entry["failure"] = {"reason": str((arguments["failure"] or {}).get("reason") or "")}
        else:
            entry["value"] = arguments["output"]
        document = {"answers": {address: entry}}
        doc = session.resume(run_id, document, stop=stop).to_json()
        return {
            **doc,
            "_error": doc.get("outcome") in ("failed", "blocked"),
            "_content": run_content(doc, self.config.console_url),
        }

    def _check_output(self, run_id: str, address: str, turn: Args, output: Any) -> None:
        """Refuse an output that fails the turn's output schema, ``OUTPUT_RETRIES`` times per
        turn, with the validation error, leaving the turn open for another try (as a managed
        turn reminds its model); past that the output goes to the run, whose step fails
        ``agent_output_invalid``.

        Raises:
            UsageError: ``agent_output_invalid`` naming the failing path and rule.
        """
        from proctor.parser.inputs import validate_inputs

        schema = turn.get("output_schema")
        if not isinstance(schema, dict):
            return
        try:
            validate_inputs(output, schema)
        except ProctorError as exc:
            key = (run_id, address)
            with self._lock:
                tries = self.output_tries[key] = self.output_tries.get(key, 0) + 1
            if tries > OUTPUT_RETRIES:
                return
            left = OUTPUT_RETRIES - tries
            message = exc.message.replace("inputs", "the output", 1)
            raise UsageError(
                f"{message}; the turn is still open: call turn_complete again with an output"
                f" that fits its output_schema ({left} more refusal(s) before the step fails)",
                code="agent_output_invalid",
            ) from None

    def _call_cancel(
        self, session: Session, arguments: dict[str, Any], _stop: Any
    ) -> dict[str, Any]:
        address = str(arguments["call"])
        turn, _, call_id = address.rpartition("/")
        run_id = self._run_for(session, arguments, turn or None)
        key = (run_id, address)
        with self._lock:
            event = self.in_flight.get(key)
            if event is not None:
                self.cancelled.add(key)
                event.set()
        if event is not None:
            settles = "stopping: it settles as it actually ends, with the cancel recorded"
            session.store.append_event(run_id, "call_cancel_requested", {"call": address})
            session.audit.emit(
                "call_cancel_requested", run_id=run_id, step_index=None, call=address
            )
            return {"run": run_id, "call": address, "state": "executing", "settles": settles}
        recorded = self._call(session, run_id, turn, call_id) if turn else None
        if recorded is None:
            raise UsageError(
                f"run {run_id} has no call {address[:80]!r} executing or recorded",
                code="call_unknown",
            )
        return {
            "run": run_id,
            "call": address,
            "state": "settled",
            "settles": f"already settled: {recorded['outcome']}",
        }


def turn_tools(config: ServerConfig) -> TurnTools | None:
    """The turn tools, or ``None`` when the driver has no turn API."""
    from proctor.runtime.engine.session import Session

    if not all(hasattr(Session, a) for a in ("turn_call", "resume", "envelope")):
        return None
    return TurnTools(config)

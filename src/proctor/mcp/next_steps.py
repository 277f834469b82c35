"""What a result tells an MCP client to do next, by what the run waits on.

The seam: :mod:`proctor.mcp.shared` builds a result's parts; this module writes the sentences
in it that send someone somewhere. A client that hands its model only the text must read the
truth there: an approval waits for a person (where and how, never "refused"), an agent turn is
the client's own work through the turn tools, a question is a person's to answer. No sentence
names a command that would wait silently on a terminal: ``proctor resume`` is only ever named
with the document it reads (``FILE|-``) and what goes into it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

__all__ = ["console_page", "held_call", "next_steps", "where_decided"]


def console_page(console_url: str, run_id: str, address: str) -> str:
    """The console page of one request: ``<console>/runs/RUN_ID/requests/ADDRESS``."""
    return f"{console_url.rstrip('/')}/runs/{quote(run_id, safe='')}/requests/{quote(address)}"


def where_decided(console_url: str | None, run_id: str, address: str) -> str:
    """Where a person decides the request at ``address``: the console page when a console is
    configured, and always the terminal command."""
    command = f"`proctor approve {run_id} {address}` in a terminal"
    if console_url:
        return f"{console_page(console_url, run_id, address)} (the proctor console) or {command}"
    return command


def held_call(tool: str, run_id: str, address: str, console_url: str | None) -> str:
    """The text of a turn call the approval floor holds: it waits for a person, nothing ran."""
    return (
        f"{tool} waits for a person's approval at {address} (run {run_id}); nothing was run."
        f" A person decides at {where_decided(console_url, run_id, address)}; this client cannot"
        " approve it. Once it is approved, make the same turn_call again with the same call_id"
        " (it then runs, once); turn_list shows whether the run still waits."
    )


def _step(run_id: str, request: Mapping[str, Any], console_url: str | None) -> str:
    kind = request.get("kind")
    address = str(request.get("address", request.get("step")))
    if kind == "agent_turn":
        return (
            f"- {address}: an agent turn, this client's to work with the turn tools:"
            f' turn_status {{"run": "{run_id}", "turn": "{address}"}} shows its instructions,'
            " the calls it may make and its output schema; turn_call makes one call;"
            " turn_complete ends it with its output and the run goes on."
        )
    if kind == "approval":
        return (
            f"- {address}: an approval{_of(request)}, a person's to give at"
            f" {where_decided(console_url, run_id, address)}; the call is not refused, it"
            " waits. This client's answer does not approve it."
        )
    if kind == "question":
        ids = [str(q.get("id")) for q in request.get("questions") or [] if isinstance(q, dict)]
        answers = "".join(f" --answer {i}=VALUE" for i in ids)
        return (
            f"- {address}: a question for a person, answered at"
            f" {where_decided(console_url, run_id, address)} (or without prompts:"
            f" `proctor approve {run_id} {address}{answers} --yes --digest"
            f" {request.get('request_digest')}`)."
        )
    if kind == "retry":
        return (
            f"- {address}: a person decides whether to send an unsettled call again, at"
            f" {where_decided(console_url, run_id, address)}."
        )
    return (
        f"- {address}: {kind}; answer it with its entry of the answers_template in the JSON part"
        f" of this result, filled in and piped to `proctor resume {run_id} -`."
    )


def _of(request: Mapping[str, Any]) -> str:
    return f" of {request['tool']}" if request.get("tool") else ""


def next_steps(doc: Mapping[str, Any], console_url: str | None = None) -> list[str]:
    """One line per request a paused ``proctor.run.v1`` envelope waits on, each naming who
    goes on and how (see the module docstring); empty for a sealed run."""
    if doc.get("status") == "sealed":
        return []
    run_id = str(doc.get("run_id"))
    return [_step(run_id, r, console_url) for r in doc.get("requests") or []]

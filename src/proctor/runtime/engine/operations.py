"""Operation steps: a connector's declared provider call, run as its operation tool.

``operation: tracker/issue.label`` runs the tool ``operation:tracker/issue.label`` through
admission exactly as a tool step runs its tool (:func:`proctor.runtime.engine.kinds.tool_step`);
the step's ``idempotency_key`` is the write's key. What differs is how a crashed write is
reconciled: a claim with no settlement runs the write's ``readback`` (a read, admitted and
recorded like any call): when every declared pointer matches, the write is settled as done and
never sent again; otherwise (no readback, a mismatch, a failed read) the step asks a person at
``<step>/retry``, as for any effect whose outcome is unknown.

:func:`run_operation_tools` gives a run its connectors' tools; :func:`operation_credentials`
the credential requirements the method's operations need resolved.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from proctor.contracts.skill import AgentStep, Cost, Method, OperationStep, ToolStep, WorkerStep
from proctor.errors import CredentialError, ProctorError, RefusedCall
from proctor.runtime.admission.governor import AwaitApproval, CallSpec, Governor
from proctor.runtime.connectors.held import held_connectors
from proctor.runtime.engine.host import StepDone, StepPause, StepRunner, run_refs, step_failed
from proctor.runtime.engine.kinds import tool_step
from proctor.runtime.tools.base import OPERATION_PREFIX

if TYPE_CHECKING:
    from collections.abc import Mapping

    from proctor.runtime.boundary.sanitize import TaintSet
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.connectors.operations import McpCaller, OperationTool
    from proctor.runtime.gateway.upstreams import Upstreams
    from proctor.runtime.records.runs import CallRecord
    from proctor.runtime.skills import LoadedSkill

__all__ = [
    "mcp_credentials",
    "operation_credentials",
    "operation_step",
    "run_operation_tools",
    "store_step",
    "unreadable_upstream_tools",
    "upstream_caller",
]


def run_operation_tools(
    skill: LoadedSkill, workspace: Workspace, environ: Mapping[str, str]
) -> dict[str, OperationTool]:
    """The operation tools a run of ``skill`` sees (its package's connectors, the workspace's);
    an MCP connector's operations reach their server through the workspace's upstreams.

    Raises:
        ParseError: a connector manifest is refused.
    """
    # found again only when a folder they come from changed (.connectors.held)
    connectors = held_connectors(workspace.root, skill.folder, skill.label, environ)
    if not connectors:  # most runs: nothing of the connectors' HTTP side is imported
        return {}
    from proctor.runtime.connectors.operations import operation_tools

    mcp = any(c.connector.mcp is not None for c in connectors.values())
    return operation_tools(connectors, upstream_caller(workspace, environ) if mcp else None)


def upstream_caller(workspace: Workspace, environ: Mapping[str, str]) -> McpCaller:
    """How an MCP connector's operations reach their upstream tool: through the workspace's
    upstreams (``.mcp.json`` and ``[mcp.<server>]``, read when the first call is admitted, so
    a configuration that does not load refuses that call with its code and nothing else), as
    an ``mcp:<server>/<tool>`` call is sent: rate limits, the pinned definition, the server's
    sandbox or egress guard, its credential delivered at that adapter only."""
    return _UpstreamCaller(workspace, environ)


class _UpstreamCaller:
    def __init__(self, workspace: Workspace, environ: Mapping[str, str]) -> None:
        self.workspace = workspace
        self.environ = environ

    def _upstreams(self, server: str) -> Upstreams:
        from proctor.runtime.gateway.upstreams import shared_upstreams

        upstreams = shared_upstreams(self.workspace, self.environ)
        if upstreams is None or server not in upstreams.config.servers:
            raise RefusedCall(
                f"upstream MCP server {server!r} is not configured (.mcp.json names no server"
                " of that name); nothing was sent",
                code="mcp_server_unknown",
                details={"server": server},
            )
        return upstreams

    def admit(self, server: str, tool: str, arguments: Mapping[str, Any], verb: str) -> None:
        """Admission's part (before a person is asked): the server is configured, the tool is
        pinned, a ``verb: read`` operation calls a read (a read is never held by the floor, so
        it may not stand for a tool that changes things: ``mcp_effect_weaker``), and the exact
        arguments fit the pinned ``inputSchema`` (``schema_invalid``, what the upstream would
        refuse, found before anyone is asked to approve it)."""
        from proctor.runtime.gateway.upstreams import upstream_tool_name
        from proctor.runtime.tools.base import validate_against

        upstreams = self._upstreams(server)
        self._read_only(upstreams, server, tool, verb)
        schema = upstreams.input_schema(server, tool)
        problem = validate_against(upstream_tool_name(server, tool), schema, dict(arguments))
        if problem is not None:
            raise RefusedCall(
                f"the arguments this operation sends upstream tool {server}/{tool} do not fit"
                f" its pinned input schema: {problem}; nothing was sent",
                code="schema_invalid",
                details={"server": server, "tool": tool},
            )

    def call(
        self, server: str, tool: str, arguments: Mapping[str, Any], verb: str
    ) -> dict[str, Any]:
        upstreams = self._upstreams(server)
        self._read_only(upstreams, server, tool, verb)
        return upstreams.call(server, tool, arguments)

    @staticmethod
    def _read_only(upstreams: Upstreams, server: str, tool: str, verb: str) -> None:
        if verb != "read":
            return
        effect = upstreams.effect_of(server, tool)
        if effect != "read":
            raise RefusedCall(
                f"a read operation may not call upstream tool {server}/{tool}, whose effect"
                f" is {effect!r} (its annotations and [mcp.{server}] settings); declare the"
                " operation a write. Nothing was sent",
                code="mcp_effect_weaker",
                details={"server": server, "tool": tool, "effect": effect},
            )


def unreadable_upstream_tools(
    method: Method, tools: Mapping[str, Any], workspace: Workspace, environ: Mapping[str, str]
) -> dict[str, Any]:
    """The ``mcp:`` tools ``method`` names (tool steps, turns' and workers' ``calls.tools``)
    that ``tools`` lacks, each refusing its calls with the upstream configuration's or lock's
    own code when that cannot be read (``mcp_lock_invalid``: which tools were pinned is then
    unknown), not ``tool_unknown``; nothing when every named tool is there (most runs)."""
    named: list[str] = []
    for step in method.steps:
        if isinstance(step, ToolStep):
            named.append(step.tool)
        elif isinstance(step, AgentStep):
            named.extend(step.agent.calls.tools)
        elif isinstance(step, WorkerStep):
            named.extend(step.worker.calls.tools)
    missing = [n for n in named if n.startswith("mcp:") and n not in tools]
    if not missing:
        return {}
    from proctor.runtime.gateway.upstreams import unavailable_tools

    return dict(unavailable_tools(workspace, environ, missing))


def _used(method: Method, tools: dict[str, OperationTool]) -> list[OperationTool]:
    """The operation tools the method's steps and turns use."""
    if not tools:  # most runs: no connector (and nothing of their HTTP side imported)
        return []
    from proctor.runtime.connectors.operations import expand_operations

    names: list[str] = []
    for step in method.steps:
        if isinstance(step, OperationStep):
            names.append(OPERATION_PREFIX + step.operation)
        elif isinstance(step, AgentStep):
            names.extend(expand_operations(list(step.agent.calls.operations), tools))
    return [t for n in sorted(set(names)) if (t := tools.get(n)) is not None]


def operation_credentials(method: Method, tools: dict[str, OperationTool]) -> list[str]:
    """The credential requirements of the (HTTP) connectors the method's operations use."""
    if not tools:
        return []
    return sorted({c for t in _used(method, tools) if (c := t.credential) is not None})


def mcp_credentials(
    method: Method,
    tools: dict[str, OperationTool],
    workspace: Workspace,
    environ: Mapping[str, str],
    taint: TaintSet,
) -> None:
    """Resolve, while the run is prepared (before any step), the credential of each upstream
    MCP server the method's operations call, as an HTTP connector's is: a missing one pauses
    the run ``needs_credential`` with its setup commands rather than failing the first call.
    The material is kept for the server's adapter alone (and enters the run's taint set).
    A configuration that does not load is left to the calls (refused with its code), and a
    test's stand-in (``providers.mcp``) starts no server, so needs no credential.

    Raises:
        NeedsCredential: a server's credential has no source (nothing was delivered).
        CredentialError: the resolver's other codes (ambiguous, audience mismatch ...).
    """
    servers = sorted({t.server for t in _used(method, tools) if t.server is not None})
    if not servers:
        return
    from proctor.runtime.engine.delivery import NeedsCredential
    from proctor.runtime.gateway.upstreams import shared_upstreams

    try:
        upstreams = shared_upstreams(workspace, environ)
    except ProctorError:
        return
    if upstreams is None or upstreams.answer is not None:
        return
    for server in servers:
        if server not in upstreams.config.servers:
            continue  # refused mcp_server_unknown at admission
        try:
            secret = upstreams.credential(server, environ)
        except CredentialError as exc:
            if exc.code != "needs_credential":
                raise
            raise NeedsCredential(exc.message, list(exc.details.get("readiness") or [])) from exc
        if secret is not None:
            taint.add(secret)


def operation_step(
    run: StepRunner,
    governor: Governor,
    index: int,
    step: OperationStep,
    inputs: dict[str, Any],
    outputs: dict[str, Any],
) -> StepDone | StepPause:
    """Run the step's operation through admission; a crashed write is confirmed by readback."""
    from proctor.runtime.connectors.operations import OperationTool, cost_quote, quote_micro_usd

    name = OPERATION_PREFIX + step.operation
    tool = governor.tools.get(name)
    quote = None if tool is None else quote_micro_usd(tool)
    declared = (cost_quote(tool) if tool is not None else None) or {}
    per = str(declared.get("per") or "call")
    as_tool = ToolStep(
        id=step.id,
        tool=name,
        inputs=step.inputs,
        idempotency_key=step.idempotency_key,
        # the step's own approval states what the person is asked to approve
        reason=step.approval.reason if step.approval is not None else step.reason,
        approvals=step.approvals,
        expires_in=step.expires_in,
        # the connector's declared price, reserved against the tree's spend limit
        cost=None if quote is None else Cost(usd_micro=quote, per=per),  # type: ignore[arg-type]
    )
    if isinstance(tool, OperationTool) and step.credential not in (None, tool.credential):
        refused = CredentialError(
            f"step '{step.id}' names credential {step.credential!r}; an operation sends only"
            f" its connector's ({tool.credential!r})",
            code="credential_mismatch",
        )
        return step_failed(step.id, refused, name)

    def confirm(claim: CallRecord) -> dict[str, Any] | None:
        if not isinstance(tool, OperationTool):
            return None
        return _readback(governor, index, step, tool, inputs, outputs, run_refs(run))

    done = tool_step(
        run, governor, index, as_tool, inputs, outputs, confirm=confirm, asks=step.approval
    )
    if step.result is None or not isinstance(done, StepDone) or done.outcome != "completed":
        return done
    return _result_contract(step, name, done)


def _result_contract(step: OperationStep, tool: str, done: StepDone) -> StepDone:
    """The step's ``result: {required: [...]}`` held to the operation's result: a field it
    lacks (absent or null) fails the step ``operation_result_incomplete``, naming the field.
    The call itself stays recorded as it settled (the provider's act is not undone)."""
    assert step.result is not None
    output = done.output if isinstance(done.output, dict) else {}
    result = output.get("result")
    got = result if isinstance(result, dict) else {}
    missing = [name for name in step.result.required if got.get(name) is None]
    if not missing:
        return done
    refused = ProctorError(
        f"operation {step.operation!r} of step '{step.id}' answered without the required"
        f" result field {missing[0]!r} (its result: {{required: [...]}} names it)",
        code="operation_result_incomplete",
    )
    failed = step_failed(step.id, refused, tool)
    failed.used = done.used
    failed.spend_micro_usd = done.spend_micro_usd
    failed.already_done = done.already_done
    return failed


def _readback(
    governor: Governor,
    index: int,
    step: OperationStep,
    tool: OperationTool,
    inputs: dict[str, Any],
    outputs: dict[str, Any],
    refs: dict[str, Any],
) -> dict[str, Any] | None:
    from proctor.parser.refs import resolve
    from proctor.runtime.connectors.operations import (
        IDEMPOTENCY_ARG,
        readback_matches,
        readback_of,
    )

    try:
        args = dict(resolve(step.inputs, inputs, outputs, run=refs))
        if step.idempotency_key is not None:
            key = resolve(step.idempotency_key, inputs, outputs, run=refs)
            args.setdefault(IDEMPOTENCY_ARG, str(key))
        found = readback_of(tool, args)
    except ProctorError:
        return None
    if found is None:
        return None
    reader, reader_args = found
    spec = CallSpec(
        tool=reader,
        args=reader_args,
        allowance=frozenset({reader}),
        step_id=step.id,
        step_index=index,
        reason=f"readback of {step.operation}: its outcome was not recorded",
        address=f"{step.id}/readback",
        can_wait=False,
    )
    try:
        call = governor.call(spec)
    except AwaitApproval:
        return None
    if not call.ok or not readback_matches(tool, args, call.result):
        return None
    return {"status": None, "result": (call.result or {}).get("result"), "confirmed": True}


def store_step(
    run: StepRunner,
    governor: Governor,
    index: int,
    step: ToolStep,
    inputs: dict[str, Any],
    outputs: dict[str, Any],
) -> StepDone | StepPause:
    """A ``store.*`` write step: a crashed claim is settled from the store's record of its key
    (done), or sent again when the key was never used (the store applies a key once)."""
    from proctor.parser.refs import resolve
    from proctor.runtime.connectors.operations import IDEMPOTENCY_ARG
    from proctor.runtime.tools.store import STORE_EXTRA, StoreContext

    def confirm(claim: CallRecord) -> dict[str, Any] | bool | None:
        tool = governor.tools.get(step.tool)
        if tool is None or governor.deliver is None:
            return None
        try:
            refs = run_refs(run)
            args = resolve(step.inputs, inputs, outputs, run=refs)
            key = args.get(IDEMPOTENCY_ARG) if isinstance(args, dict) else None
            if step.idempotency_key is not None:
                key = str(resolve(step.idempotency_key, inputs, outputs, run=refs))
            bare = CallSpec(tool=step.tool, args={}, allowance=frozenset(), step_id=step.id)
            state = governor.deliver(bare, tool).get(STORE_EXTRA)
            if not isinstance(state, StoreContext) or not isinstance(key, str):
                return None
            done = state.backend.applied(state.namespace, key)
        except ProctorError:
            return None
        return False if done is None else done

    return tool_step(run, governor, index, step, inputs, outputs, confirm=confirm)

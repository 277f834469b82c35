"""Admission: the one path every tool call takes, from any surface (``docs/admission.md``).

Owns: :mod:`.governor` (``Governor.call``: scope, schema, containment, policy, the approval
floor, budgets, delivery, execution, sanitization, the record), :mod:`.calls` (the types of a
proposed call and its outcome, re-exported by the governor), :mod:`.sandboxing` (the sandbox
a process call runs in, chosen before the floor), :mod:`.preview` (what a change will execute,
shown to the person the floor asks: a diff, an argv, a request) and :mod:`.names` (how a
proposed tool name no tool has is recorded, and refused when empty or over-long), :mod:`.calls`
(``CallSpec``, ``CallOutcome``, ``AwaitApproval``, ``Deliver``, re-exported by the governor) and
:mod:`.operations` (keyed writes' idempotency keys, ``approval: required``) and
:mod:`.cancelled` (a call ended from outside settled ``cancelled``; a write whose answer never
came handed back to its step).

Surface: ``governor.Governor``, ``CallSpec``, ``CallOutcome``, ``AwaitApproval``, ``Deliver``.
May import connectors, tools, storage, records, home, boundary and the shared runtime modules;
never the engine, agents, check, mcp or cli.
"""

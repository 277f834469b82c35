"""The run engine: a session opens a workspace and drives runs from their record to a seal.

Owns: :mod:`.session` (``Session``: run, resume, turn calls, envelopes), :mod:`.start` (a run's
start: the checks before it, then one transaction that creates it whole), :mod:`.drive` (the driver
of one run: its state, what it resolves once, the step loop), :mod:`.pausing` (how the loop
stopped: requests, the paused envelope, the seal), :mod:`.turn_calls` (the calls an agent turn
makes, admitted and priced), :mod:`.kinds` (tool, ask and agent steps, with
the reconciliation of a crashed driver's claims), :mod:`.pyfunc_step` (worker steps: one governed
``worker.run`` call whose function calls back through admission), :mod:`.process_tools`
(inline process tools, one ``command.execute`` call in the package's folder), :mod:`.waits`
(wait steps: a timed request a resume or the settle loop settles), :mod:`.operations` (operation
steps, a crashed write confirmed by its readback or a store write by its key), :mod:`.compose`
(skill steps: child runs and fan-out under the tree's concurrency ceiling), :mod:`.children`
(starting and driving one child run in its root's session), :mod:`.skill_calls` (``calls.skills``
as a turn's tools, and context skills), :mod:`.metering` (a managed turn's model requests
metered on the tree's spend ledger), :mod:`.sealing` (the receipt tree from the store alone),
:mod:`.lease` (one driver per run), :mod:`.delivery` (a run's credentials and egress, resolved
once), :mod:`.confinement` (directive runs' write folders), :mod:`.decisions` (an admitted resume
document's decisions, recorded before the run moves on) and :mod:`.approvals` (what people decide:
the waiting requests shown safely, one decision bound to its digest and recorded with its author;
:mod:`.request_lines` what a person is shown of each kind of request, every field its digest
covers, as the lines the terminal and the console both paint).
:mod:`.host` holds what these share (the ``RunHost`` and ``StepRunner`` protocols, step outcomes,
``RunInterrupted``), so the modules here import downwards only.

Surface: ``session.Session``, ``host.RunInterrupted``, ``host.AgentDriver``,
``metering.ModelMeter`` (what a managed agent meters its model requests on), ``approvals``
and ``request_lines`` (for the CLI, the console and the MCP server). May import admission,
connectors, tools, directives, storage, records, home, boundary and the shared runtime modules;
never agents, check, mcp or cli.
"""

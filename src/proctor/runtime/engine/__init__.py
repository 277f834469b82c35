"""The run engine: a session opens a workspace and drives runs from their record to a seal.

Owns: :mod:`.session` (``Session``: run, resume, turn calls, envelopes), :mod:`.start` (a
run's start: the checks before it, then one transaction that creates it whole), :mod:`.drive` (the
driver of one run: preparation, the step loop, pauses), :mod:`.kinds` (tool, ask and agent
steps, with the reconciliation of a crashed driver's claims), :mod:`.pyfunc_step` (worker
steps: one governed ``worker.run`` call whose function calls back through admission),
:mod:`.sealing` (the receipt tree from the store alone), :mod:`.lease` (one driver per run),
:mod:`.delivery` (a run's credentials and egress, resolved once) and :mod:`.confinement`
(directive runs' write folders).
:mod:`.host` holds what these share (the ``RunHost`` and ``StepRunner`` protocols, step
outcomes, ``RunInterrupted``), so the modules here import downwards only.

Surface: ``session.Session``, ``host.RunInterrupted``, ``host.AgentDriver``. May import
admission, tools, directives, records, home, boundary and the shared runtime modules; never
agents, check, mcp or cli.
"""

"""The native tools: each a name, a JSON Schema, an effect class and a handler (:mod:`.base`).

Owns the tools (``echo``, ``data.digest``, ``text.format``, ``fs.*``, ``http.request``,
``command.execute``, ``store.*``, the agent tools; ``artifact.*`` in :mod:`.artifacts`; ``git.*``
in :mod:`.git` with :mod:`.git_run`; ``process.*`` in :mod:`.procs` with :mod:`.procs_log` and the
supervisor program :mod:`.procs_supervisor`; ``worker.run``, a worker step's function, in
:mod:`.pyfunc` with the program it runs in, :mod:`.pyfunc_runner`), :mod:`.registry`, which builds
them once, :mod:`.process`, how a process tool runs its program (in the sandbox admission
chose; ended whole), and :mod:`.workspace_lock`, the command lock a workspace may ask for
(``[workspace] exclusive_commands``). A handler never checks its own authority: admission has
run scope, schema, containment and policy before it is called.

Surface: ``base`` (``Tool``, ``ToolContext``, ``Effect``, ``Access``), ``registry.native_tools``,
the few helpers admission's preview reads (``fs``, ``fsutil``, ``command``), ``store`` (its
delivery seam and the names of its writes), ``procs_log`` (what ``proctor process`` reads) and
``pyfunc.PyfuncHooks`` (how the engine hands a worker's ``ctx.call`` to admission). May import
directives, storage, records, home, boundary and the shared runtime modules; never admission,
connectors or the engine.
"""

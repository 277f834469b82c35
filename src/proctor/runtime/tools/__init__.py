"""The native tools: each a name, a JSON Schema, an effect class and a handler (:mod:`.base`).

Owns the tools (``echo``, ``data.digest``, ``text.format``, ``fs.*``, ``http.request``,
``command.execute``, the agent tools), :mod:`.registry`, which builds them once, and
:mod:`.process`, how a process tool runs its program (in the sandbox admission chose; ended
whole). A handler never checks its own authority: admission has run scope, schema,
containment and policy before it is called.

Surface: ``base`` (``Tool``, ``ToolContext``, ``Effect``, ``Access``), ``registry.native_tools``,
and the few helpers admission's preview reads (``fs``, ``fsutil``, ``command``). May import
directives, records, home, boundary and the shared runtime modules; never admission or the
engine.
"""

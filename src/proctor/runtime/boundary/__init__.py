"""The boundary between a run and its host: what a run's tools can reach, and what leaves.

Owns: :mod:`.workspace` (the workspace and containment: the one way a tool turns a path into a
file) with :mod:`.resolved` (what it yields and how it refuses), :mod:`.opened` (a file judged
by what it is, and the bytes that judging read), :mod:`.rules` (which files are
authority a run never writes and which are proctor's state it never touches) and :mod:`.fds`
(descriptor-based resolution and opening: no symlink followed between the check and the use),
:mod:`.roots` and :mod:`.reach` (the other folders a run may reach, recorded once),
:mod:`.views` (the admitted view a handler gets), :mod:`.egress` (the allow-list and the
address checks) with :mod:`.transport` (the httpx transport that dials only checked
addresses), :mod:`.sandbox` with :mod:`.sandbox_paths` (the bubblewrap sandbox every process a
run starts runs in: modes, the probe, what it hides and what is writable),
:mod:`.sandbox_sweep` (the host-side clean-up after a command), :mod:`.sandbox_git` (the git
settings a process must not leave for the host's git), :mod:`.egress_proxy` (a sandboxed
process's only way out: every connection through the egress checks) with :mod:`.netrelay` (the
sandbox's network crossings: their folder, the relay's command line, published ports) and the
relay program :mod:`.egress_forwarder`, and
:mod:`.sanitize` with its detectors in :mod:`.detect` (secrets removed from results, refusals,
audit lines and output), and :mod:`.plain_file` (whether a settings file is there, asked by
its path's text).

Surface: every module but ``detect`` and ``egress_forwarder`` (a program run inside the
sandbox, never imported). May import only ``proctor.core``, ``proctor.errors``,
``proctor.policy.user_guards`` (which guard modules a config names) and the shared runtime
modules: never records, home, tools, admission or the engine, so everything
above can rely on it.
"""

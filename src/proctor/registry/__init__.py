"""Signed skill packages and a registry that serves them.

Owns: :mod:`.package` (the exact files of a package, its content digest and version),
:mod:`.manifest` (publisher statements, the registry's countersigned manifest and its
verification, trust tiers), :mod:`.store` (the registry's SQLite index, content-addressed
blobs and hash-chained audit log), :mod:`.server` (the starlette HTTP API; imports starlette,
so only ``proctor registry serve`` and tests import it), :mod:`.client` (httpx) and
:mod:`.install` (verify, stage, rename; registry trust; resolving installed refs).

Sits above the runtime: may import ``proctor.runtime`` (the home's files, the audit chain's
digest), receipts, parser, core, contracts and errors; never the CLI, MCP or testing. This
``__init__`` imports nothing, so importing a submodule stays cheap.
"""

"""Connectors: declared provider operations (``connectors/<name>/connector.yaml``) as tools.

Owns: :mod:`.catalog` (where connectors are found: a skill package's ``connectors/`` and the
workspace's, the package's first; each manifest parsed strictly) and :mod:`.operations` (each
operation as an :class:`~.operations.OperationTool` named ``operation:<connector>/<op>``: its
request built from the template, sent through the egress guard pinned to the connector's
origin, with the connector's credential added at this adapter only; the delivery seam; the
provider key of a write; the readback a crashed write is reconciled by; the cost quote), and
:mod:`.held` (what the catalog found, kept while the folders it read are as they were).

Surface: ``catalog``, ``held`` and ``operations``. May import tools, records, home, boundary and the
shared runtime modules; never admission, the engine, agents, check, mcp or cli.
"""

"""The fleet: workers on many machines driving runs from one PostgreSQL run store.

Owns: :mod:`.queue` (submissions, heartbeats, the worker list, orphans given back; SQL on the
PostgreSQL store's connections) and :mod:`.daemon` (``proctor worker``'s slots and heartbeat).

Surface: ``queue.WorkQueue``, ``daemon.Worker``. May import the engine (sessions drive the
work), records and the shared runtime modules; nothing below imports the fleet.
"""

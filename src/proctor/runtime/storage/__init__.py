"""Skill state: the durable store behind the native ``store.*`` tools.

Owns: :mod:`.base` (the :class:`~.base.StateStore` interface every backend implements: per
namespace, append-only event streams with sequence numbers and a key-value map, each write
idempotent by its key; the bounds), :mod:`.select` (:func:`~.select.open_state_store`: the
backend ``PROCTOR_STORE_URL`` names, once per process), and the backends :mod:`.sqlite`
(``.proctor/store.sqlite``, the default), :mod:`.postgres` (psycopg 3 with a pool) and
:mod:`.redis` (streams for events, hashes for keys).

Surface: ``base`` and ``select``. May import only ``proctor.errors`` and ``proctor.receipts``;
never another runtime part (the tools above it hand it a namespace they derived from the run,
never one a call names).
"""

"""How the PostgreSQL run store takes a run's lease: one statement, one commit.

A take reads the lease row ``FOR UPDATE SKIP LOCKED`` (a row another driver is taking at this
moment, or writing under its fence, counts as held, without waiting), decides in the same
statement what the take is, and writes it:

- ``renew``: the row is this driver's, at the epoch it holds: its expiry moves on;
- ``held``: another holder's lease that has not expired (and is not the one to steal from):
  nothing is written, the holder is answered;
- ``take``: a released, lapsed or stolen lease, or this holder's own at an epoch it does not
  hold: the row becomes this holder's at the next epoch (an epoch only grows, see
  :mod:`.fencing`), naming whom it was taken from.

The statement is its own transaction and waits for the flush (a lost take would let two
drivers share an epoch). A run with no lease row yet has it made (:data:`MAKE`); a start makes
it at once, in the transaction that created the run.
"""

from __future__ import annotations

__all__ = ["MAKE", "NOW", "TAKE"]

NOW = "extract(epoch from clock_timestamp())"
"""The database's clock in epoch seconds (leases expire by it, not by a machine's)."""

TAKE = (
    "WITH cur AS MATERIALIZED (SELECT holder, expires_at < " + NOW + " AS expired, epoch"
    " FROM leases WHERE run_id = %s FOR UPDATE SKIP LOCKED),"
    " act AS MATERIALIZED (SELECT holder, epoch, CASE"
    " WHEN holder = %s AND epoch = %s::bigint THEN 'renew'"
    " WHEN holder NOT IN ('', %s) AND NOT expired AND holder IS DISTINCT FROM %s::text"
    " THEN 'held' ELSE 'take' END AS what FROM cur),"
    " done AS (UPDATE leases l SET holder = %s, expires_at = " + NOW + " + %s,"
    " epoch = CASE WHEN a.what = 'take' THEN a.epoch + 1 ELSE a.epoch END,"
    " taken_from = CASE WHEN a.what = 'renew' THEN l.taken_from"
    " WHEN a.holder IN ('', %s) THEN NULL ELSE a.holder END"
    " FROM act a WHERE l.run_id = %s AND a.what <> 'held' RETURNING 1)"
    " SELECT a.holder, a.epoch, a.what, (SELECT count(*) FROM done) FROM act a"
)
"""The take of an existing lease row. Parameters: run id, holder, the epoch this process
holds (or null), holder, the holder to steal from (or null), holder, the lease's seconds,
holder, run id. One row (the row as read, what the take was, whether it wrote) or none (no
row, or one locked by another driver)."""

MAKE = (
    "INSERT INTO leases (run_id, holder, expires_at, epoch) VALUES"
    " (%s, %s, " + NOW + " + %s, 1) ON CONFLICT (run_id) DO NOTHING RETURNING 1"
)
"""A run's first lease row, held at epoch 1 (nothing when the run has one already).
Parameters: run id, holder, the lease's seconds."""

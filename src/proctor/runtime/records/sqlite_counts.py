"""What keeps the SQLite run store's per-step reads flat as a run grows (``sqlite.py`` uses it).

- ``calls_step``: calls by ``(run_id, step_id)``, so a step reads its own calls only (the rowid
  that ends every index keeps them in claim order);
- ``run_counts``: a run's call and step counts, kept by triggers in the same statement as each
  insert or settlement, so a driver (one per ``Session.turn_call``) learns how many calls and
  receipts the run used without counting its rows. A run's row is created with the run (in
  its start's transaction), or, for a run a store wrote before the counters existed, the
  first time it is asked for (counted then, in one transaction); until then the triggers
  update nothing, so such a store is counted correctly too.
"""

from __future__ import annotations

__all__ = ["COUNTS_SCHEMA", "COUNT_ROWS", "NEW_COUNTS"]

COUNTS_SCHEMA = """
CREATE INDEX IF NOT EXISTS calls_step ON calls (run_id, step_id);
CREATE TABLE IF NOT EXISTS run_counts (
    run_id TEXT PRIMARY KEY,
    calls INTEGER NOT NULL,
    admitted INTEGER NOT NULL,
    steps INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS calls_counted AFTER INSERT ON calls BEGIN
    UPDATE run_counts SET calls = calls + 1, admitted = admitted + (NEW.outcome IS NOT 'refused')
        WHERE run_id = NEW.run_id;
END;
CREATE TRIGGER IF NOT EXISTS calls_recounted AFTER UPDATE OF outcome ON calls BEGIN
    UPDATE run_counts
        SET admitted = admitted + (NEW.outcome IS NOT 'refused') - (OLD.outcome IS NOT 'refused')
        WHERE run_id = NEW.run_id;
END;
CREATE TRIGGER IF NOT EXISTS steps_counted AFTER INSERT ON steps BEGIN
    UPDATE run_counts SET steps = steps + 1 WHERE run_id = NEW.run_id;
END;
"""

COUNT_ROWS = (
    "INSERT INTO run_counts (run_id, calls, admitted, steps) SELECT ?1,"
    " (SELECT COUNT(*) FROM calls WHERE run_id = ?1),"
    " (SELECT COUNT(*) FROM calls WHERE run_id = ?1 AND outcome IS NOT 'refused'),"
    " (SELECT COUNT(*) FROM steps WHERE run_id = ?1) WHERE true"
    " ON CONFLICT (run_id) DO NOTHING"
)
"""Count a run's rows once, into its ``run_counts`` row (the triggers keep it from then on)."""

NEW_COUNTS = (
    "INSERT INTO run_counts (run_id, calls, admitted, steps) VALUES (?, 0, 0, 0)"
    " ON CONFLICT (run_id) DO NOTHING"
)
"""A run's counters as its creation starts them, in the transaction that inserts the run: all
zeros, as PostgreSQL's (its calls and steps are written by its driver, after it exists; a row
a read of the counters made before, for the same id, is left as it is)."""

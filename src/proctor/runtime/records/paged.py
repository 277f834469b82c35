"""A run's calls and steps read a page at a time, for both run stores (SQLite and PostgreSQL).

A run of 100,000 steps or a turn of 1,000,000 calls does not fit in memory as records, so what
reads all of them (the seal, a rebuilt envelope's trace) reads pages of ``batch`` rows, each
from where the last one ended (a keyset on the row's place in the store's claim order, never
an offset), holding one page at a time:

- :func:`iter_calls`: a run's calls in claim order (or newest first). The run's first and
  last place are read once (on SQLite, by the first page's statement, and once more for a run
  of more than a page), and each page is one range of the table's primary key between
  them; on SQLite the run is matched per row (``+run_id`` keeps the planner on the primary
  key: the index by run and step would sort every call of the run again for each page);
- :func:`iter_step_calls`: one step's calls in claim order, one range of the index by run and
  step (whose last column is the claim order in both stores);
- :func:`iter_step_records`: settled steps in the order they settled, as
  :func:`iter_calls` pages calls;
- :func:`unsettled_call_steps`: the steps that have calls but no settlement, in the order of
  each one's first claim (one pass over the run's index entries);
- :meth:`PagedReads.step_record`: one settled step, by its key.

Each function takes the store's ``rows(sql, params)`` (every row of one statement) and its
dialect; the stores' methods of the same names are what callers use.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any, Literal

from proctor.runtime.records.rows import CALL_COLS, call_from_row
from proctor.runtime.records.runs import CallRecord

__all__ = [
    "PAGE",
    "PagedReads",
    "iter_calls",
    "iter_step_calls",
    "iter_step_records",
    "unsettled_call_steps",
]

PAGE = 1000
"""Rows a page holds by default."""

Rows = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]
Dialect = Literal["sqlite", "postgres"]


def _sql(dialect: Dialect, sql: str) -> str:
    """``sql`` written with ``?`` and ``{run}`` (the run's column where the primary key must
    lead), in the dialect's words."""
    if dialect == "sqlite":
        return sql.replace("{run}", "+run_id")
    return sql.replace("{run}", "run_id").replace("?", "%s")


def _checked(batch: int) -> int:
    if batch < 1:
        raise ValueError("a page holds at least one row")
    return batch


def _record(row: tuple[Any, ...]) -> CallRecord:
    record = call_from_row(row)
    record.seq = int(row[-1])
    return record


def _keyset(
    rows: Rows,
    dialect: Dialect,
    table: str,
    cols: str,
    run_id: str,
    batch: int,
    newest_first: bool,
    after: int | None = None,
    through: int | None = None,
) -> Iterator[tuple[Any, ...]]:
    """Rows of ``table`` for ``run_id`` by ``ord``, a page of ``batch`` at a time (only those
    past ``after`` and up to ``through``, when given). With both given, the run's first and
    last place are not looked up (that is a pass over the run's index entries)."""
    batch = _checked(batch)
    at_first: int | None = None  # where the first page ended, when read with the places
    if after is None and through is None and dialect == "sqlite":
        # the first page between the run's first and last place, found in the same statement
        # (each once: neither depends on the row); the places are read again only when the
        # run holds more than the page
        first = (f"SELECT {cols}, ord FROM {table} WHERE +run_id = ?1"
                 f" AND ord >= (SELECT MIN(ord) FROM {table} WHERE run_id = ?1)"
                 f" AND ord <= (SELECT MAX(ord) FROM {table} WHERE run_id = ?1)"
                 f" ORDER BY ord{' DESC' if newest_first else ''} LIMIT ?2")  # fmt: skip
        got = rows(first, (run_id, batch))
        yield from got
        if len(got) < batch:
            return
        at_first = int(got[-1][-1])
    if after is not None and through is not None:
        low, high = after + 1, through
    else:
        bounds = rows(_sql(dialect, f"SELECT MIN(ord), MAX(ord) FROM {table} WHERE run_id = ?"),
                      (run_id,))  # fmt: skip
        low, high = bounds[0] if bounds else (None, None)
        if low is None or high is None:
            return
        if after is not None:
            low = max(int(low), after + 1)
        if through is not None:
            high = min(int(high), through)
    if int(low) > int(high):
        return
    if newest_first:
        page = _sql(dialect, f"SELECT {cols}, ord FROM {table} WHERE {{run}} = ? AND ord < ?"
                    " AND ord >= ? ORDER BY ord DESC LIMIT ?")  # fmt: skip
        at, edge = int(high) + 1, int(low)
    else:
        page = _sql(dialect, f"SELECT {cols}, ord FROM {table} WHERE {{run}} = ? AND ord > ?"
                    " AND ord <= ? ORDER BY ord LIMIT ?")  # fmt: skip
        at, edge = int(low) - 1, int(high)
    if at_first is not None:
        at = at_first  # past the first page, read above
    while True:
        got = rows(page, (run_id, at, edge, batch))
        yield from got
        if len(got) < batch:
            return
        at = int(got[-1][-1])


def iter_calls(
    rows: Rows,
    dialect: Dialect,
    run_id: str,
    *,
    batch: int = PAGE,
    newest_first: bool = False,
    after: int | None = None,
    through: int | None = None,
) -> Iterator[CallRecord]:
    """A run's calls in claim order (``newest_first``: the other way), each with its ``seq``;
    only those whose ``seq`` is past ``after`` and at most ``through``, when given."""
    for row in _keyset(
        rows, dialect, "calls", CALL_COLS, run_id, batch, newest_first, after, through
    ):
        yield _record(row)


def iter_step_calls(
    rows: Rows, dialect: Dialect, run_id: str, step_id: str | None, *, batch: int = PAGE
) -> Iterator[CallRecord]:
    """One step's calls in claim order (``step_id`` ``None``: the calls of no step)."""
    batch = _checked(batch)
    where = "step_id IS NULL" if step_id is None else "step_id = ?"
    page = _sql(dialect, f"SELECT {CALL_COLS}, ord FROM calls WHERE run_id = ? AND {where}"
                " AND ord > ? ORDER BY ord LIMIT ?")  # fmt: skip
    at = -1
    while True:
        params = (run_id, at, batch) if step_id is None else (run_id, step_id, at, batch)
        got = rows(page, params)
        for row in got:
            yield _record(row)
        if len(got) < batch:
            return
        at = int(got[-1][-1])


def iter_step_records(
    rows: Rows, dialect: Dialect, run_id: str, *, batch: int = PAGE
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Settled steps ``(step_id, body)`` in the order they settled."""
    for row in _keyset(rows, dialect, "steps", "step_id, body", run_id, batch, False):
        yield str(row[0]), json.loads(row[1])


def unsettled_call_steps(rows: Rows, dialect: Dialect, run_id: str) -> list[str | None]:
    """The steps of a run's calls that have no settlement, in the order of each one's first
    claim; ``None`` for calls of no step (grouped with a step named ``""``, as a seal
    groups them)."""
    found = rows(
        _sql(dialect, "SELECT step_id, MIN(ord) FROM calls c WHERE run_id = ? GROUP BY step_id"
             " HAVING NOT EXISTS (SELECT 1 FROM steps s WHERE s.run_id = ?"
             " AND s.step_id = COALESCE(c.step_id, ''))"),
        (run_id, run_id),
    )  # fmt: skip
    return [row[0] for row in sorted(found, key=lambda row: int(row[1]))]


class PagedReads(ABC):
    """The paged reads of a run store: the store gives ``_dialect`` and ``_page`` (every row
    of one statement, under its own lock or connection)."""

    _dialect: Dialect

    @abstractmethod
    def _page(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Every row of one statement."""

    def iter_calls(
        self,
        run_id: str,
        *,
        batch: int = PAGE,
        newest_first: bool = False,
        after: int | None = None,
        through: int | None = None,
    ) -> Iterator[CallRecord]:
        """See :meth:`proctor.runtime.records.runs.RunStore.iter_calls`."""
        return iter_calls(
            self._page, self._dialect, run_id, batch=batch, newest_first=newest_first,
            after=after, through=through,
        )  # fmt: skip

    def iter_step_calls(
        self, run_id: str, step_id: str | None, *, batch: int = PAGE
    ) -> Iterator[CallRecord]:
        """See :meth:`proctor.runtime.records.runs.RunStore.iter_step_calls`."""
        return iter_step_calls(self._page, self._dialect, run_id, step_id, batch=batch)

    def iter_step_records(
        self, run_id: str, *, batch: int = PAGE
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """See :meth:`proctor.runtime.records.runs.RunStore.iter_step_records`."""
        return iter_step_records(self._page, self._dialect, run_id, batch=batch)

    def unsettled_call_steps(self, run_id: str) -> list[str | None]:
        """See :meth:`proctor.runtime.records.runs.RunStore.unsettled_call_steps`."""
        return unsettled_call_steps(self._page, self._dialect, run_id)

    def step_record(self, run_id: str, step_id: str) -> dict[str, Any] | None:
        """See :meth:`proctor.runtime.records.runs.RunStore.step_record`."""
        found = self._page(
            _sql(self._dialect, "SELECT body FROM steps WHERE run_id = ? AND step_id = ?"),
            (run_id, step_id),
        )
        return json.loads(found[0][0]) if found else None

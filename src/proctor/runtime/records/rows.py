"""The row shapes both run stores share: column lists, JSON text, and records from rows.

SQLite and PostgreSQL keep the same columns in the same order, so a row read from either
becomes a record the same way; only the SQL placeholders and transactions differ.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from proctor.receipts.jsontext import compact_encoder
from proctor.runtime.records.runs import CallRecord, RequestRecord, RunRecord

__all__ = [
    "CALL_COLS",
    "REQ_COLS",
    "RUN_COLS",
    "RUN_WIDTH",
    "call_from_row",
    "call_params",
    "dumps",
    "dumps_member",
    "now",
    "request_from_row",
    "run_from_row",
]

RUN_COLS = (
    "cursor, run_id, skill, method, status, outcome, receipt_id, created_at, updated_at, data,"
    " identity"
)
RUN_WIDTH = len(RUN_COLS.split(","))
"""How many columns :data:`RUN_COLS` names (a joined row's run part is its first this many)."""
RUN_HEAD_COLS = RUN_COLS.replace(", data", ", '{}'")
"""The columns of :data:`RUN_COLS` with an empty ``data`` (a list that shows no run's state)."""
CALL_COLS = (
    "run_id, call_id, step_id, tool, state, args_digest, outcome, result, idempotency_key, site"
)
REQ_COLS = "run_id, address, kind, request_digest, body, state, decision, ord"


_second: tuple[int, str] = (-1, "")  # the last whole second stamped, and its text


def now() -> str:
    """The time a row (and an audit line) records: UTC, microseconds, ISO 8601, as
    ``datetime.now(UTC).isoformat(timespec="microseconds")`` writes it (the same clock,
    truncated to the microsecond the same way); the date and time of day are formatted once
    per second, not per row (a run stamps some ten rows and lines)."""
    global _second
    seconds, micros = divmod(time.time_ns() // 1000, 1_000_000)
    held = _second
    if held[0] != seconds:
        held = _second = (
            seconds,
            datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        )
    return f"{held[1]}.{micros:06d}+00:00"


_DUMPS = compact_encoder(sort_keys=True)


def dumps(value: Any) -> str:
    """The JSON text a row keeps (sorted keys, compact, UTF-8 as is); one encoder, reused
    (``json.dumps`` with these options builds a new one at every call)."""
    return _DUMPS(value)


def dumps_member(value: Mapping[str, Any], key: str, member: str) -> str:
    """:func:`dumps` of ``value`` where ``member`` is already ``dumps(value[key])``: the same
    text, without encoding that value again (a read's 4 KiB content is encoded once for its
    digest and spliced in here). ``value``'s keys are strings, as in every stored document.
    """
    before = {k: v for k, v in value.items() if k < key}
    after = {k: v for k, v in value.items() if k > key}
    # one join: a chain of + copies the long member into every partial string
    return "".join(
        (
            _DUMPS(before)[:-1],
            "," if before else "",
            _DUMPS(key),
            ":",
            member,
            "," if after else "",
            _DUMPS(after)[1:],
        )
    )


def run_from_row(row: tuple[Any, ...]) -> RunRecord:
    """A run from a row of :data:`RUN_COLS`."""
    return RunRecord(
        cursor=int(row[0]),
        run_id=row[1],
        skill=row[2],
        method=row[3],
        status=row[4],
        outcome=row[5],
        receipt_id=row[6],
        created_at=row[7],
        updated_at=row[8],
        data=json.loads(row[9]),
        identity=row[10],
    )


def call_params(call: CallRecord) -> tuple[Any, ...]:
    """The values of :data:`CALL_COLS` for an insert of ``call``."""
    return (
        call.run_id,
        call.call_id,
        call.step_id,
        call.tool,
        call.state,
        call.args_digest,
        call.outcome,
        call.result_json
        if call.result_json is not None
        else (None if call.result is None else dumps(call.result)),
        call.idempotency_key,
    )


def call_from_row(row: tuple[Any, ...]) -> CallRecord:
    """A call from a row of :data:`CALL_COLS`."""
    return CallRecord(
        run_id=row[0],
        call_id=row[1],
        step_id=row[2],
        tool=row[3],
        state=row[4],
        args_digest=row[5],
        outcome=row[6],
        result=None if row[7] is None else json.loads(row[7]),
        idempotency_key=row[8],
        site=None if row[9] is None else json.loads(row[9]),
    )


def request_from_row(row: tuple[Any, ...]) -> RequestRecord:
    """A request from a row of :data:`REQ_COLS`."""
    return RequestRecord(
        run_id=row[0],
        address=row[1],
        kind=row[2],
        request_digest=row[3],
        body=json.loads(row[4]),
        state=row[5],
        decision=None if row[6] is None else json.loads(row[6]),
        cursor=int(row[7]),
    )

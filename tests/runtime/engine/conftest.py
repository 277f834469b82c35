"""Every seal of the engine's tests: the driver's record it seals from is the store's row.

:func:`proctor.runtime.engine.pausing.seal` seals from the driver's record without reading the
row again; a field written to the store during a run but not to the driver's record would
seal a receipt of the old value. Only the fields below, which the seal never reads, may differ.
A seal told that the run has no request (``no_requests``: its driver created the run and
recorded none) is held to the store's requests too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from proctor.policy import write_tally
from proctor.runtime.engine import pausing

NOT_SEALED = frozenset(
    {
        "spend",  # the ledger's running state (the seal sums the steps' settled spend)
        "credentials",  # what the run resolved (delivery)
        "approvers",  # who approved a request so far (approvals)
        "lapsed_holder",
        "envelope",  # a pause's envelope (the seal writes its own)
        "needs_credential",
        "steps_run",
        "child_receipts",
        write_tally.KEY,
    }
)


def differing(record: Any, stored: Any) -> set[str]:
    """The fields the seal reads where ``record`` and the store's row ``stored`` differ."""
    keys = (set(record.data) | set(stored.data)) - NOT_SEALED
    out = {k for k in keys if record.data.get(k, KeyError) != stored.data.get(k, KeyError)}
    for name in ("run_id", "skill", "method", "identity"):
        if getattr(record, name) != getattr(stored, name):
            out.add(name)
    return out


@pytest.fixture(autouse=True)
def _seals_from_the_stored_row(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = pausing.seal_run

    def checked(session: Any, record: Any, **kwargs: Any) -> Any:
        stored = session.store.get_run(record.run_id)
        assert stored is not None
        assert differing(record, stored) == set(), "the driver's record is not the store's"
        if kwargs.get("no_requests"):
            assert session.store.requests(record.run_id) == [], "a request the seal did not read"
        return real(session, record, **kwargs)

    monkeypatch.setattr(pausing, "seal_run", checked)
    yield

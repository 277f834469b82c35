"""Receipt budgets and the bounds every verifier holds a receipt tree to (pure).

A tree holds at most :data:`MAX_TREE_RECEIPTS` receipts (its root included) and reaches at most
:data:`MAX_TREE_DEPTH` levels below its root (the root is level 0, its children level 1, ...).
No receipt commits more than :data:`SEGMENT_FANOUT` children when proctor writes it: a run of
more steps, or a step of more calls, commits *segment* receipts that each commit up to that many
(and segments of segments past ``SEGMENT_FANOUT ** 2``), so a tree of millions of receipts is
read a bounded receipt at a time. A run's own budget stops at :data:`MAX_RUN_RECEIPTS` (runs,
steps and calls; segments are not counted: they add at most one receipt per
``SEGMENT_FANOUT - 1``, which the tree bound leaves room for). Below that the limit is the
authority's ``max_receipts`` (and the host's ``PROCTOR_MAX_RECEIPTS``).

A run holds its whole tree to the same bound as a budget, one budget for the root and every
child run and turn call below it (a fan-out cannot multiply it): each step and call reserves its
receipt as it is admitted, and each run :data:`RUN_RECEIPTS` as it starts (its own receipt and
the receipt of the step a refusal ends it with), so one that would take the tree past the bound
is refused before it runs, and a run that did its work, or was refused, always seals within it.
"""

from __future__ import annotations

import threading

from proctor.errors import RefusedCall

__all__ = [
    "MAX_CHILD_DEPTH",
    "MAX_RUN_RECEIPTS",
    "MAX_TREE_DEPTH",
    "MAX_TREE_RECEIPTS",
    "RUN_RECEIPTS",
    "SEGMENT_FANOUT",
    "ReceiptBudget",
    "child_depth_limit",
]

MAX_TREE_RECEIPTS = 16_777_216
"""The most receipts a verifier walks in one tree, segments included (2**24)."""
MAX_RUN_RECEIPTS = 16_000_000
"""The most receipts a run's budget admits (its runs, steps and calls); the segments that
group them fit in what :data:`MAX_TREE_RECEIPTS` leaves above it."""
SEGMENT_FANOUT = 1024
"""The most children a receipt proctor writes commits; more are grouped into segments."""
MAX_TREE_DEPTH = 160
"""Levels below the root a verifier walks (64 before segments: a child run ``d`` levels down now
puts its calls up to ``7d + 5`` levels below the root when every run and step on the way is
segmented twice, 145 at :data:`MAX_CHILD_DEPTH`)."""
RUN_RECEIPTS = 2
"""What a run reserves as it starts: its run receipt, and one for the step a refusal (of this
budget or another) settles it with, so the refusal's own receipt never passes the limit."""

MAX_CHILD_DEPTH = 20
"""The deepest a child run may start below its root, whatever the authority states (its
``max_child_depth`` can only lower it). A child ``d`` levels down puts its calls' receipts up to
``3d + 2`` levels below the root's (a turn's call, the child run, its step, its call at each
level; ``7d + 5`` with two levels of segments under every run and step), so 20 keeps every tree
within :data:`MAX_TREE_DEPTH`; it also bounds a skill that calls
itself, which nothing else stops before the driver runs out of stack."""


def child_depth_limit(stated: int | None) -> int:
    """The child depth a run may reach: the authority's ``max_child_depth`` (``stated``) held to
    :data:`MAX_CHILD_DEPTH`."""
    return MAX_CHILD_DEPTH if stated is None else min(stated, MAX_CHILD_DEPTH)


class ReceiptBudget:
    """Counts the receipts a run's tree has admitted against a limit (safe to share between
    the threads of a fan-out).

    Raises:
        ValueError: on construction, a limit below 1 or above :data:`MAX_RUN_RECEIPTS`
            (configuration errors are caught where the limit is read, see
            ``proctor.runtime.limits``).
    """

    __slots__ = ("_limit", "_lock", "_used")

    def __init__(self, limit: int = MAX_RUN_RECEIPTS, used: int = 0) -> None:
        if not 1 <= limit <= MAX_RUN_RECEIPTS:
            raise ValueError(f"a receipt budget is between 1 and {MAX_RUN_RECEIPTS}")
        if not 0 <= used <= limit:
            raise ValueError("a receipt budget cannot start past its limit")
        self._limit = limit
        self._used = used
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        """The most receipts the run may hold, its root included."""
        return self._limit

    @property
    def used(self) -> int:
        """Receipts reserved so far."""
        return self._used

    @property
    def remaining(self) -> int:
        """Receipts still available."""
        return self._limit - self._used

    def reserve(self, n: int = 1) -> None:
        """Reserve ``n`` receipts before the step or call that will write them runs.

        Raises:
            RefusedCall: (code ``receipt_budget_exceeded``) the reservation would pass the limit;
                nothing is reserved.
            ValueError: ``n`` is negative.
        """
        if n < 0:
            raise ValueError("cannot reserve a negative number of receipts")
        with self._lock:
            if self._used + n > self._limit:
                raise RefusedCall(
                    f"this would take the run's tree to {self._used + n} receipts, past its"
                    f" limit of {self._limit} (max_receipts)",
                    code="receipt_budget_exceeded",
                    details={"limit": self._limit, "used": self._used, "requested": n},
                )
            self._used += n

    def count(self, n: int) -> None:
        """Count ``n`` receipts already written or reserved by an earlier driver (a resumed
        run's steps and calls, a sealed child's tree): never refused, held at the limit.

        Raises:
            ValueError: ``n`` is negative.
        """
        if n < 0:
            raise ValueError("cannot count a negative number of receipts")
        with self._lock:
            self._used = min(self._limit, self._used + n)

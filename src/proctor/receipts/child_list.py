"""A parent's children grouped into ``segment`` receipts past the fan-out (see
:class:`ChildList`), and the :class:`Ref` a parent commits; both re-exported by
:mod:`proctor.receipts.writer`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import NamedTuple, Protocol

from proctor.core.budget import SEGMENT_FANOUT
from proctor.receipts.model import Subject

__all__ = ["ChildList", "Ref", "SegmentWriter"]


class Ref(NamedTuple):
    """A written receipt, as its parent commits it.

    ``size`` counts the receipts of its subtree (itself included); ``height`` is how many
    levels lie below it (0 for a leaf). ``serial`` is the writer's number for a receipt it
    wrote (-1 for a ref made elsewhere, such as a child run's root), so that the writer tells a
    ref committed twice from a bit per receipt rather than a set of every id; it takes no part
    in equality, hashing or the repr.

    A named tuple: a seal builds one per receipt, and a tuple is built in one step where a
    frozen value class sets each field in turn. Read-only like one.
    """

    receipt_id: str
    body_digest: str
    kind: str
    outcome: str
    size: int
    height: int
    serial: int = -1

    def __eq__(self, other: object) -> bool:
        return type(other) is Ref and self[:6] == other[:6]

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self[:6])

    def __repr__(self) -> str:
        return (
            f"Ref(receipt_id={self.receipt_id!r}, body_digest={self.body_digest!r}, "
            f"kind={self.kind!r}, outcome={self.outcome!r}, size={self.size!r}, "
            f"height={self.height!r})"
        )


class SegmentWriter(Protocol):
    """What a :class:`ChildList` writes its segments through (a ``ReceiptWriter``)."""

    def segment(
        self, subject: Subject, children: Sequence[Ref], *, started_at: datetime, ended_at: datetime
    ) -> Ref:
        """Seal a segment receipt committing ``children``."""
        ...


class ChildList:
    """The children of one parent, in order, grouped into ``segment`` receipts past
    :data:`~proctor.core.budget.SEGMENT_FANOUT` (segments of segments past its square).

    :meth:`add` each child's ref as it is written, then commit :meth:`refs` in the parent: the
    children themselves when there are at most ``fanout`` (the tree is as it always was), else
    the segments, at most ``fanout`` of them. A segment is written as soon as the child after
    its last one arrives, so the list holds at most ``fanout`` refs per level, whatever the
    parent's count. Segments take ``subject`` and the span ``started_at``..``ended_at`` (the
    parent's).
    """

    __slots__ = ("_ended", "_fanout", "_levels", "_started", "_subject", "_writer")

    def __init__(
        self,
        writer: SegmentWriter,
        subject: Subject,
        *,
        started_at: datetime,
        ended_at: datetime,
        fanout: int = SEGMENT_FANOUT,
    ) -> None:
        if fanout < 2:
            raise ValueError("a segment groups at least two children")
        self._writer = writer
        self._subject = subject
        self._started = started_at
        self._ended = max(ended_at, started_at)
        self._fanout = fanout
        self._levels: list[list[Ref]] = [[]]

    def add(self, ref: Ref) -> None:
        """Append one child (written before it is added).

        Raises:
            as :meth:`ReceiptWriter.write`, when a segment is due.
        """
        self._push(0, ref)

    def extend(self, refs: Iterable[Ref]) -> None:
        """:meth:`add` each of ``refs`` in turn."""
        for ref in refs:
            self._push(0, ref)

    def refs(self) -> list[Ref]:
        """What the parent commits: the children, or their segments (writing the last ones).

        Raises:
            as :meth:`ReceiptWriter.write`.
        """
        levels = self._levels
        level = 0
        while level < len(levels) - 1:
            rest = levels[level]
            if rest:
                levels[level] = []
                self._push(level + 1, self._segment(rest))
            level += 1
        top = levels[-1]
        self._levels = [[]]
        return top

    def _push(self, level: int, ref: Ref) -> None:
        levels = self._levels
        row = levels[level]
        if len(row) == self._fanout:  # one more than a receipt commits: the full row folds
            levels[level] = [ref]
            if level + 1 == len(levels):
                levels.append([])
            self._push(level + 1, self._segment(row))
        else:
            row.append(ref)

    def _segment(self, children: list[Ref]) -> Ref:
        return self._writer.segment(
            self._subject, children, started_at=self._started, ended_at=self._ended
        )

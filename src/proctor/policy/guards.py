"""Guards: what they receive and what they return (the registry that names them is
:mod:`proctor.policy.registry`).

A guard is a function ``GuardContext -> GuardVerdict | None``. ``None`` is a silent pass (nothing
recorded); a verdict is recorded whatever it says, and ``allowed=False`` is a denial that the
rule's ``enforcement`` turns into a refusal (``block``) or a recorded warning (``warn``).

Field names follow the reference kernel's guard interface, so a guard written for it reads the
same attributes here.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from proctor.contracts.values import dataclass

__all__ = [
    "DEFAULT_WRITE_BUDGET",
    "Distinct",
    "GuardContext",
    "GuardFn",
    "GuardVerdict",
    "RunHistory",
]

DEFAULT_WRITE_BUDGET = 50
"""Changing calls per run before ``check_write_budget`` refuses (``PROCTOR_WRITE_BUDGET``)."""

T = TypeVar("T")


class RunHistory:
    """A run's calls so far, appended as they are made (what ``GuardContext.run_history`` shows).

    Appending is constant time; the tuple a guard reads is built only when a guard reads it
    (and reused until the next append), so a call whose guards never look at the history
    does not copy it: a run's calls cost the same at its 30,000th call as at its first.
    What a guard needs of every earlier call (the shipped write guards: the paths written,
    the changing calls counted) it asks as a :meth:`tally`, carried on from the last call
    it was asked at, so such a guard too costs the same at the 10,000th write as at the first.
    """

    __slots__ = ("_entries", "_starts", "_tallies", "_tuple")

    def __init__(self) -> None:
        self._entries: list[Mapping[str, Any]] = []
        self._tuple: tuple[Mapping[str, Any], ...] = ()
        # by key: how many entries the tally has taken, and its value after them
        self._tallies: dict[str, tuple[int, Any]] = {}
        # by key: where a tally starts when calls before these entries count (another
        # governor's calls of the same run, carried in the run's data)
        self._starts: dict[str, Callable[[], Any]] = {}

    def seed(self, key: str, start: Callable[[], Any]) -> None:
        """Start the tally ``key`` from ``start()`` instead of its own start: what the run's
        earlier calls (made before this history's first entry) add up to."""
        self._starts[key] = start
        self._tallies.pop(key, None)

    def append(self, entry: Mapping[str, Any]) -> None:
        """Record one call (``tool``, ``args``, ``outcome``)."""
        self._entries.append(entry)

    def clear(self) -> None:
        """Forget every call (benchmarks reuse one governor)."""
        self._entries.clear()
        self._tuple = ()
        self._tallies.clear()
        self._starts.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def snapshot(self, length: int | None = None) -> tuple[Mapping[str, Any], ...]:
        """The first ``length`` calls (default: all), oldest first, as a tuple."""
        n = len(self._entries) if length is None else length
        if len(self._tuple) != n:
            self._tuple = tuple(self._entries[:n])
        return self._tuple

    def tally(
        self,
        key: str,
        start: Callable[[], T],
        add: Callable[[T, Mapping[str, Any]], T],
        length: int | None = None,
    ) -> T:
        """``add`` folded over the first ``length`` calls (default: all) from ``start()``, kept
        under ``key`` and carried on from the calls it already took: each call is added once
        while the tallies asked for only grow (a shorter one asked later starts again).

        ``add`` may change the value it is given and return it (a set grows in place): the
        value is then the tally's own, good until the next ``tally`` of the same key.
        """
        n = len(self._entries) if length is None else length
        taken, value = self._tallies.get(key, (0, None))
        if key not in self._tallies or taken > n:
            taken, value = 0, self._starts.get(key, start)()
        entries = self._entries
        for i in range(taken, n):
            value = add(value, entries[i])
        self._tallies[key] = (n, value)
        return value  # type: ignore[no-any-return]


class Distinct:
    """Distinct strings as they come (``values``), and the first ``shown`` of them in sorted
    order (``first``), kept as each comes so nothing sorts them all: a tally's value for a
    guard that names what a run touched (the shipped ``check_no_bulk_writes``).

    ``unheld`` counts strings taken but not held in ``values`` (a tally carried from a run's
    data keeps only so many; ``first`` is kept whole): ``count`` is every string taken.
    """

    __slots__ = ("first", "shown", "unheld", "values")

    def __init__(self, shown: int) -> None:
        self.shown = shown
        self.values: set[str] = set()
        self.first: list[str] = []
        self.unheld = 0

    @property
    def count(self) -> int:
        """How many distinct strings were taken (held or not)."""
        return len(self.values) + self.unheld

    def update(self, values: Iterable[str]) -> None:
        """Take ``values`` (those already held change nothing)."""
        for value in values:
            if value in self.values:
                continue
            self.values.add(value)
            if len(self.first) < self.shown or value < self.first[-1]:
                bisect.insort(self.first, value)
                del self.first[self.shown :]


class GuardContext:
    """What a guard sees of one proposed call. Guards must not mutate the mappings they get.

    Immutable, compared by value, built positionally or by keyword in the field order below.

    Attributes:
        tool_name: the proctor tool name (``fs.read``, ``http.request`` ...).
        raw_args: the arguments as the caller sent them (before schema defaults).
        args: the arguments after schema validation (defaults filled).
        reason: the caller's stated reason for the call (``""`` when none was given).
        directive_id: the directive or skill the run executes, when there is one.
        run_history: the run's prior calls, oldest first, each a mapping with ``tool`` (a
            proctor tool name), ``args`` and ``outcome`` (``"ok"``, ``"failed"`` or
            ``"refused"``). Always a tuple when read; it may be given as a
            :class:`RunHistory`, whose calls so far it then shows, built on first read.
        workspace_relpaths: the workspace-relative paths the call touches, as containment
            resolved them (empty when the caller did not resolve any).
        write_budget: changing calls allowed per run (see :data:`DEFAULT_WRITE_BUDGET`).
    """

    __slots__ = (
        "_history",
        "_history_length",
        "args",
        "directive_id",
        "raw_args",
        "reason",
        "tool_name",
        "workspace_relpaths",
        "write_budget",
    )
    __match_args__ = (
        "tool_name",
        "raw_args",
        "args",
        "reason",
        "directive_id",
        "run_history",
        "workspace_relpaths",
        "write_budget",
    )

    tool_name: str
    raw_args: Mapping[str, Any]
    args: Mapping[str, Any]
    reason: str
    directive_id: str | None
    workspace_relpaths: tuple[str, ...]
    write_budget: int
    _history: tuple[Mapping[str, Any], ...] | RunHistory
    _history_length: int

    def __init__(
        self,
        tool_name: str,
        raw_args: Mapping[str, Any],
        args: Mapping[str, Any],
        reason: str,
        directive_id: str | None,
        run_history: tuple[Mapping[str, Any], ...] | RunHistory,
        workspace_relpaths: tuple[str, ...] = (),
        write_budget: int = DEFAULT_WRITE_BUDGET,
    ) -> None:
        put = object.__setattr__
        put(self, "tool_name", tool_name)
        put(self, "raw_args", raw_args)
        put(self, "args", args)
        put(self, "reason", reason)
        put(self, "directive_id", directive_id)
        put(self, "_history", run_history)
        # a RunHistory grows after this call; the context shows the calls made before it
        put(self, "_history_length", len(run_history))
        put(self, "workspace_relpaths", workspace_relpaths)
        put(self, "write_budget", write_budget)

    @property
    def run_history(self) -> tuple[Mapping[str, Any], ...]:
        """The run's prior calls, oldest first (see the class attributes)."""
        history = self._history
        if isinstance(history, RunHistory):
            history = history.snapshot(self._history_length)
            object.__setattr__(self, "_history", history)
        return history

    def history_tally(
        self, key: str, start: Callable[[], T], add: Callable[[T, Mapping[str, Any]], T]
    ) -> T:
        """``add`` folded over :attr:`run_history` from ``start()``: what a guard needs of
        every earlier call, without reading them all again at each call when the governor
        keeps the history (:meth:`RunHistory.tally`; ``key`` names the fold there, so one key
        is one ``start`` and ``add``). ``add`` may change its value in place and return it;
        the guard must not change the value it gets.
        """
        history = self._history
        if isinstance(history, RunHistory):
            return history.tally(key, start, add, self._history_length)
        value = start()
        for entry in history:
            value = add(value, entry)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"GuardContext is immutable: cannot assign to {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"GuardContext is immutable: cannot delete {name!r}")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__match_args__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GuardContext):
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # compared by value; its mappings are mutable

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__match_args__)
        return f"GuardContext({shown})"


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    """A guard's opinion of a call.

    Attributes:
        allowed: ``False`` denies; the rule's enforcement decides what a denial does.
        message: one sentence a person can act on; never the secret it found.
        code: stable snake_case identifier of the finding (``sensitive_path`` ...).
        metadata: JSON-ready detail for the audit record (field paths, counts ...).
    """

    allowed: bool
    message: str
    code: str | None = None
    metadata: Mapping[str, Any] | None = None


GuardFn = Callable[[GuardContext], GuardVerdict | None]
"""The shape every guard has."""

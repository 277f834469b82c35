"""Waking idle worker slots when work arrives, instead of polling the queue.

Every change that makes a submission takeable (a new one, one given back, one whose run another
submission stopped holding) sends ``pg_notify`` on the queue's channel in the same transaction,
so the notice goes out at commit and only then. Each worker keeps one extra connection that
``LISTEN``\\ s on that channel (:class:`Listener`) and rings its :class:`Doorbell`; an idle slot
waits on the bell until it rings, until the next submission is due (a retry's backoff, a timed
wait), or until a safety interval passes (a notice can be missed while the listening connection
is being made again: it rings once when it is back, and the interval bounds the rest).

While the listener has no connection, slots fall back to polling at the worker's poll interval:
a lost notice delays work, it never loses it (the queue's rows are the truth, the bell only says
"look now").

A notice wakes one idle slot of the worker, not all of them (one submission is work for one
slot; waking every idle slot made each look at the queue and all but one find nothing): it
leaves a turn (:meth:`Doorbell.notice`), which the first slot to wait takes. A slot that took
work while more was due passes a turn on to a waiting slot (:meth:`Doorbell.pass_on`), so a
notice that stands for several submissions (work given back in bulk: one transaction sends one
notice) still reaches as many slots. A ring (the listener back, a stop) wakes every slot.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

__all__ = ["SAFETY_SECONDS", "Doorbell", "Listener", "channel_for"]

SAFETY_SECONDS = 5.0
"""The longest an idle slot waits without a ring while the listener is connected."""


def channel_for(schema: str) -> str:
    """The notification channel of the queue in ``schema`` (one per schema: several stores in
    one database never wake each other's workers)."""
    return "proctor_work_" + hashlib.sha256(schema.encode("utf-8")).hexdigest()[:16]


class Doorbell:
    """A counter slots wait on: :meth:`ring` wakes every waiter that saw an older count;
    :meth:`notice` lets one slot waiting in :meth:`take_turn` go (and counts as a ring for
    :meth:`wait`).

    Args:
        turns: the most turns kept for slots to take (a worker's slot count: more notices
            than slots while every slot is busy need no more than one look each).
    """

    def __init__(self, turns: int = 1) -> None:
        self._cond = threading.Condition()
        self._rung = 0
        self._everyone = 0
        self._turns = 0
        self._most = max(1, turns)
        self._waiting = 0
        self.live = False
        """True while a listener is connected (slots may then wait longer than a poll)."""

    @property
    def rung(self) -> int:
        """How many times the bell rang; read before looking at the queue."""
        with self._cond:
            return self._rung

    @property
    def everyone(self) -> int:
        """The count of the last ring meant for every slot; read before looking at the queue
        (:meth:`take_turn`)."""
        with self._cond:
            return self._everyone

    def ring(self) -> None:
        """Wake every waiting slot."""
        with self._cond:
            self._rung += 1
            self._everyone = self._rung
            self._cond.notify_all()

    def notice(self) -> None:
        """Work may have arrived: one slot (the first to wait, or one waiting now) looks."""
        with self._cond:
            self._rung += 1
            self._turns = min(self._turns + 1, self._most)
            self._cond.notify_all()

    def pass_on(self) -> None:
        """A slot took work on its turn: another waiting slot (if any) looks too, in case the
        notice stood for more than one submission."""
        with self._cond:
            if self._waiting and not self._turns:
                self._turns = 1
                self._cond.notify_all()

    def wait(self, seen: int, timeout: float) -> bool:
        """Wait until the bell rang since ``seen`` was read, or ``timeout`` seconds; True when
        it rang."""
        with self._cond:
            return self._cond.wait_for(lambda: self._rung != seen, timeout=max(0.0, timeout))

    def take_turn(self, seen: int, timeout: float) -> bool:
        """Wait until a turn is free (taking it) or every slot was rung for since
        :attr:`everyone` read ``seen``, or ``timeout`` seconds; True when woken."""
        with self._cond:
            self._waiting += 1
            try:
                woken = self._cond.wait_for(
                    lambda: self._turns > 0 or self._everyone != seen, timeout=max(0.0, timeout)
                )
            finally:
                self._waiting -= 1
            if woken and self._everyone == seen:
                self._turns -= 1
            return woken


class Listener:
    """The worker's listening connection: rings ``bell`` at every notice on ``channel``.

    Runs in its own daemon thread until ``stop`` is set; a connection that fails is made again
    with backoff (the bell is not live meanwhile, and rings once when it is back, for any
    notice missed in between).
    """

    def __init__(self, url: str, channel: str, bell: Doorbell, stop: threading.Event) -> None:
        self.url = url
        self.channel = channel
        self.bell = bell
        self.stop = stop
        self.thread = threading.Thread(target=self._run, name="proctor-listener", daemon=True)

    def start(self) -> None:
        """Start listening in the background."""
        self.thread.start()

    def _run(self) -> None:
        backoff = 0.05
        while not self.stop.is_set():
            try:
                self._listen()
                backoff = 0.05
            except Exception:  # any failure of the extra connection: poll until it is back
                self.bell.live = False
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)
        self.bell.live = False

    def _listen(self) -> None:
        import psycopg
        from psycopg import sql

        conn: Any = psycopg.connect(self.url, autocommit=True, connect_timeout=5)
        with conn:
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
            self.bell.live = True
            self.bell.ring()  # anything queued while there was no listener
            while not self.stop.is_set():
                for _ in conn.notifies(timeout=0.5):
                    self.bell.notice()

"""Idle workers are woken by the queue's notices, not by polling (``runtime.fleet.doorbell``).

On a fresh PostgreSQL schema: a listener rings its bell when work is submitted or freed by a
finished submission (only when work of the same run waited behind it) or put back for a retry,
and only after the submitting transaction commits; a rolled back
submission rings nothing; two schemas' queues never wake each other's workers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from proctor.runtime.fleet.doorbell import Doorbell, Listener
from proctor.runtime.fleet.queue import WorkQueue
from tests.pg import fresh_schema

START = {"ref": "echo", "cwd": "."}


@dataclass
class Listening:
    queue: WorkQueue
    bell: Doorbell


def _queue(url: str) -> WorkQueue:
    from proctor.runtime.records.postgres import PostgresRunStore

    return WorkQueue(PostgresRunStore(url))


@contextmanager
def listening(url: str) -> Iterator[Listening]:
    queue = _queue(url)
    bell, stop = Doorbell(), threading.Event()
    listener = Listener(url, queue.channel, bell, stop)
    seen = bell.rung
    listener.start()
    try:
        assert bell.wait(seen, 30), "the listener never connected"  # it rings once when live
        assert bell.live
        yield Listening(queue, bell)
    finally:
        stop.set()
        listener.thread.join(30)


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as url:
        yield url


def test_a_submission_rings_the_bell_after_its_commit(url: str) -> None:
    with listening(url) as on:
        seen = on.bell.rung
        with on.queue.store.transaction():
            on.queue.submit("start", "run-1", START)
            assert not on.bell.wait(seen, 0.3)  # not before the commit
        assert on.bell.wait(seen, 30)
        taken = on.queue.take("w")
        assert taken is not None
        seen = on.bell.rung
        on.queue.submit("resume", "run-1", {"document": {}})  # held back behind the start
        assert on.bell.wait(seen, 30)
        assert on.queue.take("w2") is None  # its run is taken
        seen = on.bell.rung
        on.queue.finish(taken.id, "done")  # the work held back behind it may go now
        assert on.bell.wait(seen, 30)
        assert on.queue.take("w2") is not None


def test_a_retry_rings_for_the_work_held_back_behind_it(url: str) -> None:
    with listening(url) as on:
        seen = on.bell.rung
        on.queue.submit("start", "run-9", START)
        assert on.bell.wait(seen, 30)
        taken = on.queue.take("w")
        assert taken is not None
        on.queue.submit("resume", "run-9", {"document": {}})  # held back behind the start
        assert on.queue.take_next("w2") == (None, None)  # not due for an idle slot either
        seen = on.bell.rung
        on.queue.retry_later(taken.id, 60, "run_busy")  # the start waits: the resume may go
        assert on.bell.wait(seen, 30)
        work = on.queue.take("w2")
        assert work is not None and work.kind == "resume"


def test_a_finish_with_nothing_held_back_wakes_nobody(url: str) -> None:
    with listening(url) as on:
        seen = on.bell.rung
        on.queue.submit("start", "run-6", START)
        assert on.bell.wait(seen, 30)  # the submission's own ring
        taken = on.queue.take("w")
        assert taken is not None
        seen = on.bell.rung
        on.queue.finish(taken.id, "done")  # no work of its run waits: idle slots sleep on
        assert not on.bell.wait(seen, 0.5)


def test_a_rolled_back_submission_rings_nothing(url: str) -> None:
    with listening(url) as on:
        seen = on.bell.rung
        with pytest.raises(RuntimeError), on.queue.store.transaction():
            on.queue.submit("start", "run-2", START)
            raise RuntimeError("abandon")
        assert not on.bell.wait(seen, 0.5)
        assert on.queue.counts() == {}


def test_another_schemas_queue_does_not_wake_this_one(url: str) -> None:
    with listening(url) as on, fresh_schema() as other_url:
        other = _queue(other_url)
        assert other.channel != on.queue.channel
        seen = on.bell.rung
        other.submit("start", "run-3", START)
        assert not on.bell.wait(seen, 0.5)


def test_next_due_names_the_wait_for_delayed_work(url: str) -> None:
    queue = _queue(url)
    assert queue.next_due() is None
    queue.submit("start", "run-4", START, delay=60)
    due = queue.next_due()
    assert due is not None and 30 < due <= 60
    queue.submit("start", "run-5", START)
    assert queue.next_due() == 0


def test_a_take_that_finds_nothing_names_when_to_look_again(url: str) -> None:
    queue = _queue(url)
    assert queue.take_next("w") == (None, None)  # nothing queued: wait for a notice
    queue.submit("start", "run-7", START, delay=60)
    work, due = queue.take_next("w")
    assert work is None and due is not None and 30 < due <= 60
    queue.submit("start", "run-8", START)
    work, due = queue.take_next("w")
    assert work is not None and work.run_id == "run-8" and due is None
    # work held back behind its run's taken submission is not due for this slot: its finish
    # announces it (an idle slot never looks again and again meanwhile)
    queue.submit("resume", "run-8", {"document": {}})
    work, due = queue.take_next("w")
    assert work is None and due is not None and 30 < due <= 60


def test_a_finish_rides_on_the_next_take_and_frees_its_run_in_the_same_statement(
    url: str,
) -> None:
    """A slot records how its last submission ended with its next take (one commit): the
    finished row is done, work held back behind it can be that take, and work of its run the
    take leaves rings the idle workers; a take that fails records nothing."""
    from proctor.runtime.fleet.queue import Finished

    with listening(url) as on:
        seen = on.bell.rung
        on.queue.submit("start", "run-10", START)
        assert on.bell.wait(seen, 30)  # its own ring, heard before the next is counted
        first = on.queue.take("w")
        assert first is not None
        seen = on.bell.rung
        on.queue.submit("resume", "run-10", {"document": {}})  # held back behind the start
        assert on.bell.wait(seen, 30)  # the submission's own ring
        seen = on.bell.rung
        work, _ = on.queue.take_next("w", finished=Finished(first.id, "done", "sealed"))
        assert work is not None and work.run_id == "run-10" and work.kind == "resume"
        assert not on.bell.wait(seen, 0.5)  # it took the held-back work itself: nobody rung
        assert on.queue.counts() == {"done": 1, "taken": 1}
        # a finish whose held-back work this take leaves (another run's came first) rings
        seen = on.bell.rung
        on.queue.submit("start", "run-11", START)
        on.queue.submit("resume", "run-10", {"document": {}})
        while on.bell.rung < seen + 2:  # their own rings
            assert on.bell.wait(on.bell.rung, 30)
        seen = on.bell.rung
        other, _ = on.queue.take_next("w", finished=Finished(work.id, "failed", "x: y"))
        assert other is not None and other.run_id == "run-11"
        assert on.bell.wait(seen, 30)
        taken = on.queue.take("w2")
        assert taken is not None and taken.run_id == "run-10"
        notes = on.queue.store._rows("SELECT state, note FROM submissions ORDER BY id")
        assert notes[:2] == [("done", "sealed"), ("failed", "x: y")]
        # nothing to take: the finish is recorded all the same
        assert on.queue.take_next("w", finished=Finished(other.id, "done")) == (None, None)
        assert on.queue.counts() == {"done": 2, "failed": 1, "taken": 1}
        # a submission given back meanwhile (and taken by another worker) is not finished
        assert on.queue.take_next("w", finished=Finished(taken.id, "done")) == (None, None)
        assert on.queue.counts() == {"done": 2, "failed": 1, "taken": 1}
        # nor does naming it free its run: work held back behind another worker's take stays
        on.queue.submit("resume", "run-10", {"document": {}})
        held, _ = on.queue.take_next("w", finished=Finished(taken.id, "done"))
        assert held is None
        assert on.queue.counts() == {"done": 2, "failed": 1, "taken": 1, "queued": 1}


def _waiters(bell: Doorbell, count: int) -> tuple[list[bool], list[threading.Thread]]:
    """``count`` slots waiting for their turn (up to 30 s each); what each returned."""
    woken: list[bool] = []
    seen = bell.everyone
    threads = [
        threading.Thread(target=lambda: woken.append(bell.take_turn(seen, 30)))
        for _ in range(count)
    ]
    for thread in threads:
        thread.start()
    _until(lambda: bell._waiting == count, "every slot waiting")
    return woken, threads


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_a_notice_wakes_one_waiting_slot_and_a_ring_wakes_every_one() -> None:
    bell = Doorbell(turns=3)
    woken, threads = _waiters(bell, 3)
    bell.notice()
    _until(lambda: bool(woken), "a slot let go")
    time.sleep(0.3)  # time for any other slot to be (wrongly) let go too
    assert woken == [True]  # one look for one submission
    assert bell._waiting == 2
    bell.ring()  # a stop (or the listener back): every slot
    for thread in threads:
        thread.join(30)
    assert woken == [True, True, True]


def test_a_notice_while_no_slot_waits_is_kept_for_the_next_one() -> None:
    bell = Doorbell(turns=2)
    seen = bell.everyone
    for _ in range(5):  # more notices than slots while every slot is busy
        bell.notice()
    assert bell.take_turn(seen, 0)
    assert bell.take_turn(seen, 0)
    assert not bell.take_turn(seen, 0)  # kept: one turn per slot, no more


def test_work_taken_while_more_was_due_passes_a_turn_to_a_waiting_slot() -> None:
    bell = Doorbell(turns=2)
    bell.pass_on()  # nobody waits: nothing kept
    assert not bell.take_turn(bell.everyone, 0)
    woken, threads = _waiters(bell, 1)
    bell.pass_on()
    threads[0].join(30)
    assert woken == [True]

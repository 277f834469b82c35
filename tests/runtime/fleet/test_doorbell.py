"""Idle workers are woken by the queue's notices, not by polling (``runtime.fleet.doorbell``).

On a fresh PostgreSQL schema: a listener rings its bell when work is submitted or freed by a
finished submission (only when work of the same run waited behind it), and only after the
submitting transaction commits; a rolled back
submission rings nothing; two schemas' queues never wake each other's workers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
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

"""Stranded runs (``running``, no lease, no work queued) go back to the queue as ``resume {}``
for any worker, but not for ever: a run whose submissions have failed
:data:`~proctor.runtime.fleet.queue.MAX_ATTEMPTS` times (a bug that strands it each time it is
driven) is left for a person, rather than queued again on every heartbeat. A heartbeat says
whether there is anything to give back (so a quiet beat is one statement)."""

from __future__ import annotations

from proctor.runtime.fleet.queue import DEAD_AFTER_SECONDS, MAX_ATTEMPTS, WorkQueue
from proctor.runtime.records.postgres import PostgresRunStore
from proctor.runtime.records.runs import RunRecord
from tests.pg import fresh_schema


def _queued(queue: WorkQueue, run_id: str) -> int:
    rows = queue._rows(
        "SELECT count(*) FROM submissions WHERE run_id = %s AND state = 'queued'", (run_id,)
    )
    return int(rows[0][0])


def test_a_stranded_run_is_queued_again_until_its_submissions_have_failed_too_often() -> None:
    with fresh_schema() as url:
        store = PostgresRunStore(url)
        queue = WorkQueue(store)
        run_id = "a" * 32
        queue.register("w", 1)
        assert not queue.heartbeat("w", [], 4, "running")  # nothing to give back: one statement
        store.create_run(RunRecord(run_id=run_id, skill="s", method="m"))  # running, no lease
        for attempt in range(MAX_ATTEMPTS + 1):
            # the beat says when there is something to give back, and only then
            assert queue.heartbeat("w", [], 4, "running") == (attempt < MAX_ATTEMPTS), attempt
            assert queue.reclaim_orphans() == (1 if attempt < MAX_ATTEMPTS else 0), attempt
            assert _queued(queue, run_id) == (1 if attempt < MAX_ATTEMPTS else 0)
            if attempt < MAX_ATTEMPTS:  # a worker takes it and a bug fails it again
                taken = queue.take("w")
                assert taken is not None and taken.run_id == run_id
                queue.finish(taken.id, "failed", "worker_error: unexpected KeyError (a bug)")
        assert queue.reclaim_orphans() == 0  # left for a person: proctor resume RUN_ID
        store.close()


def test_a_beat_says_when_a_worker_is_dead_or_its_taken_work_has_no_live_worker() -> None:
    with fresh_schema() as url:
        queue = WorkQueue(PostgresRunStore(url))
        queue.register("alive", 1)
        queue.register("dead", 1)
        queue.submit("start", "b" * 32, {"ref": "echo", "cwd": "."})
        assert queue.take("dead") is not None
        assert not queue.heartbeat("alive", [], 4, "running")  # "dead" beat a moment ago
        queue._rows(
            "UPDATE workers SET heartbeat_at = heartbeat_at - %s WHERE worker_id = 'dead'",
            (DEAD_AFTER_SECONDS + 1,),
        )
        assert queue.heartbeat("alive", [], 4, "running")
        assert queue.reclaim_orphans() == 1  # its start goes back to the queue
        assert not queue.heartbeat("alive", [], 4, "running")
        gone = queue.take("gone")  # taken by a worker that never registered
        assert gone is not None
        assert queue.heartbeat("alive", [], 4, "running")

"""Signature checks in helper processes answer exactly what checking them in turn answers, and
a helper that is missing or dies is never trusted: what it did not answer is checked here."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from proctor.receipts.signing import PublicKey
from proctor.receipts.verify import SignatureCheck, verify_serially, verify_tree
from proctor.runtime.records.folder_reader import FolderReader
from proctor.runtime.records.signature_processes import BATCH, SignatureProcesses
from tests.receipts.helpers import body, other_signer, signer, write_sealed


def _checks(n: int, bad: Sequence[int] = (), short: Sequence[int] = ()) -> list[SignatureCheck]:
    s = signer()
    out: list[SignatureCheck] = []
    for i in range(n):
        message = f"message {i}".encode() * (1 + i % 7)
        sig = s.sign(message)
        if i in bad:
            sig = sig[::-1]
        if i in short:
            sig = sig[:63]
        out.append((s.public_key, sig, message))
    return out


@pytest.mark.parametrize(
    ("bad", "short"), [((), ()), ((0,), ()), ((63,), ()), ((40, 20), ()), ((), (33,))]
)
def test_each_batch_names_its_lowest_failing_index(bad: list[int], short: list[int]) -> None:
    checks = _checks(BATCH, bad, short)
    expected = verify_serially(checks)
    assert expected == (min([*bad, *short]) if bad or short else None)
    with SignatureProcesses(workers=1) as pool:
        # more batches than a helper takes ahead: some are checked here, some in the helper
        waits = [pool.submit(checks) for _ in range(6)]
        assert [wait() for wait in waits] == [expected] * 6
        assert pool._helpers, "a full batch starts a helper"


def test_a_key_of_another_signer_is_checked_in_the_helper() -> None:
    mine = _checks(BATCH)
    o = other_signer()
    theirs: list[SignatureCheck] = [(o.public_key, o.sign(m), m) for _, _, m in mine]
    crossed: list[SignatureCheck] = [*theirs[:10], (o.public_key, mine[10][1], mine[10][2])]
    with SignatureProcesses(workers=1) as pool:
        waits = [pool.submit(mine), pool.submit(theirs), pool.submit(crossed * 5)]
        assert [wait() for wait in waits] == [None, None, 10]


def test_small_batches_start_no_helper() -> None:
    with SignatureProcesses(workers=1) as pool:
        assert pool.submit(_checks(20, bad=(3,)))() == 3
        assert pool._helpers == []


def test_batches_a_dead_helper_did_not_answer_are_checked_here() -> None:
    good, bad = _checks(BATCH), _checks(BATCH, bad=(17,))
    with SignatureProcesses(workers=1) as pool:
        first = pool.submit(good)
        helper = pool._helpers[0]
        os.kill(helper.pid, signal.SIGKILL)
        os.waitpid(helper.pid, 0)
        waits = [pool.submit(bad), pool.submit(good)]
        assert first() is None
        assert [wait() for wait in waits] == [17, None]


def test_beside_another_thread_the_helper_is_started_not_forked() -> None:
    """Forking copies locks other threads hold: with a second thread, a fresh interpreter."""
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        with SignatureProcesses(workers=1) as pool:
            waits = [pool.submit(_checks(BATCH, bad=(9,))), pool.submit(_checks(BATCH))]
            assert [wait() for wait in waits] == [9, None]
            assert pool._helpers[0].proc is not None
    finally:
        release.set()
        other.join()


def test_single_threaded_the_helper_is_forked() -> None:
    # in a fresh interpreter: a test process may hold threads other tests left (thread pools)
    import subprocess

    probe = (
        "from proctor.runtime.records.signature_processes import BATCH, SignatureProcesses\n"
        "from tests.runtime.records.test_signature_processes import _checks\n"
        "with SignatureProcesses(workers=1) as pool:\n"
        "    assert pool.submit(_checks(BATCH))() is None\n"
        "    assert pool._helpers[0].proc is None, 'started, not forked'\n"
        "    assert pool._helpers[0].pid is not None\n"
    )
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_no_interpreter_to_start_falls_back_to_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "")
    monkeypatch.delattr(os, "fork")
    with SignatureProcesses(workers=1) as pool:
        assert pool.submit(_checks(BATCH, bad=(50,)))() == 50
        assert pool.submit(_checks(BATCH))() is None
        assert pool._helpers == [] and pool._threads is not None


def test_a_check_that_raises_is_raised_to_the_caller() -> None:
    checks = _checks(BATCH)
    broken: list[SignatureCheck] = [*checks[:30], (checks[0][0], checks[0][1], None), *checks[31:]]  # type: ignore[list-item]
    with SignatureProcesses(workers=1) as pool, pytest.raises(TypeError):
        pool.submit(broken)()


def test_a_public_key_subclass_is_checked_here() -> None:
    class Odd(PublicKey):
        pass

    s = signer()
    odd = Odd(raw=s.public_key.raw, key_id=s.public_key.key_id, _key=s.public_key._key)
    checks: list[SignatureCheck] = [(odd, sig, m) for _, sig, m in _checks(BATCH, bad=(5,))]
    with SignatureProcesses(workers=1) as pool:
        assert pool.submit(checks)() == 5


def test_a_tree_verifies_alike_in_helpers(tmp_path: Path) -> None:
    """Many signed steps, one bad signature deep in: the same result every way."""
    s = signer()
    steps = [
        write_sealed(tmp_path, body("step", s.key_id, audit_head=None, step_id=f"s{i}"), s)
        for i in range(5 * BATCH)
    ]
    target = tmp_path / f"{steps[3 * BATCH + 7].removeprefix('sha256:')}.json"
    donor = (tmp_path / f"{steps[0].removeprefix('sha256:')}.json").read_bytes()
    head = target.read_bytes().rsplit(b'"signature":', 1)[0]
    target.write_bytes(head + b'"signature":' + donor.rsplit(b'"signature":', 1)[1])
    root = write_sealed(tmp_path, body("run", s.key_id, steps, audit_head=None), s)
    keys = [s.public_key]
    one = verify_tree(root, FolderReader(tmp_path), keys)
    for workers in (0, 1, 2):
        with SignatureProcesses(workers=workers) as pool:
            got = verify_tree(
                root, FolderReader(tmp_path), keys, submit_batch=pool.submit, batch_size=BATCH
            )
        assert got == one
    assert (one.reason, one.failing_receipt_id) == ("signature_invalid", steps[3 * BATCH + 7])


@pytest.mark.parametrize("bad", [(), (200,), (130, 5), (4 * BATCH - 1,)])
def test_a_large_batch_goes_out_in_parts_and_names_its_first_failure(bad: tuple[int, ...]) -> None:
    checks = _checks(4 * BATCH, bad)
    with SignatureProcesses(workers=1) as pool:
        waits = [pool.submit(checks) for _ in range(3)]
        assert [wait() for wait in waits] == [verify_serially(checks)] * 3
        assert pool._helpers


def test_a_checker_must_say_how_it_closes() -> None:
    from proctor.runtime.records.signature_pool import Closing, SignaturePool

    class NoClose(Closing):
        pass

    with pytest.raises(TypeError, match="close"):
        NoClose()  # type: ignore[abstract]
    with SignaturePool(workers=0) as pool:  # a real checker is a context manager
        assert isinstance(pool, Closing)

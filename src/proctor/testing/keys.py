"""What makes a test's run repeatable: the public test key, a fixed clock, fixed run ids.

The test key is derived from a fixed, published string (:data:`TEST_KEY_PHRASE`), so anyone
can rebuild it and nothing secret is committed: it proves that a receipt came from a replay of
a test, never who made it. Never trust it, or sign with it, for anything but ``proctor test``.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from proctor.receipts.signing import PublicKey, Signer, signer_from_seed

__all__ = [
    "TEST_CLOCK_START",
    "TEST_KEY_PHRASE",
    "fixed_clock",
    "fixture_public_key",
    "fixture_signer",
    "run_ids_for",
]

TEST_KEY_PHRASE = b"proctor test: a public fixture key; never use it for anything but proctor test"
"""The Ed25519 seed of the test key is ``sha256`` of this phrase: public by design."""

TEST_CLOCK_START = datetime(2026, 1, 1, tzinfo=UTC)
"""The first instant of every test's clock; each reading is one millisecond later."""


def fixture_signer() -> Signer:
    """The public test key every ``proctor test`` receipt is signed with."""
    return signer_from_seed(hashlib.sha256(TEST_KEY_PHRASE).digest())


def fixture_public_key() -> PublicKey:
    """The public half of :func:`fixture_signer`, the only key a test's receipts verify under."""
    return fixture_signer().public_key


def fixed_clock() -> Callable[[], datetime]:
    """A clock starting at :data:`TEST_CLOCK_START` that moves one millisecond per reading,
    so the same run reads the same times and signs the same receipts."""
    ticks = itertools.count()
    return lambda: TEST_CLOCK_START + timedelta(milliseconds=next(ticks))


def run_ids_for(test_id: str) -> Callable[[], str]:
    """Run ids derived from the test's id: the same test gets the same ids every time."""
    counter = itertools.count(1)
    return lambda: hashlib.sha256(f"{test_id}#{next(counter)}".encode()).hexdigest()[:32]

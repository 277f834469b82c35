"""Suite-wide test settings."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _collect_garbage_in_the_test_that_made_it() -> Iterator[None]:
    """Finalize each test's garbage inside that test, under its own warning filters.

    With ``filterwarnings = error`` an unclosed file or socket becomes an exception in its
    finaliser; left to the garbage collector it would surface in whichever later test happens
    to trigger a collection. Collecting here blames the test that leaked it.

    What was alive when the test began is frozen first (``gc.freeze``): the collection then
    walks only what the test made, where its garbage is, not the whole heap of every module
    and cache the worker loaded (a full collection after every test was 60% of the suite's
    time). What the test made that points at older objects is collected as before; older
    objects are kept alive as they were.
    """
    gc.freeze()
    yield
    gc.collect()

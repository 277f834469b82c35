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
    """
    yield
    gc.collect()

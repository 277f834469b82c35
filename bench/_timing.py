"""The timing loop the micro-benchmarks share: warm up, time each call, print median and p95.

Run the benches as scripts (``.venv/bin/python bench/NAME.py``): this folder is then on the
path, so ``from _timing import measure`` finds this module.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def measure(
    label: str, fn: Callable[[], Any], rounds: int = 5000, *, warm: int = 50, width: int = 52
) -> float:
    """Call ``fn`` ``warm`` times untimed, then ``rounds`` times timed; print and return the
    median in microseconds (p95 beside it)."""
    for _ in range(warm):
        fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - start)
    times.sort()
    median = statistics.median(times) / 1000
    p95 = times[int(len(times) * 0.95)] / 1000
    print(f"{label:<{width}} median {median:10.1f} us   p95 {p95:10.1f} us")
    return median

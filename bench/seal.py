"""The seal of a long run beside its signing floor: a 10,000-step run's receipt tree (the run,
10,000 signed steps, 10,000 amortized calls) written through ``ReceiptWriter`` into a real,
durable receipt store, against the Ed25519 signatures alone of the same 10,001 signed bodies.

    .venv/bin/python bench/seal.py [--steps 10000] [--rounds 5] [--batch 4096]

Both are timed in this process, in turns, ``--rounds`` times; prints median and p95 wall and
CPU time of each and the ratio of the seal to the floor (target: seal <= 2x the floor), plus
the syncs the seal made (fsync/fdatasync counted around the store's calls).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from proctor.receipts.canonical import canonical, digest
from proctor.receipts.model import Subject
from proctor.receipts.signing import Signer, signer_from_seed
from proctor.receipts.writer import ReceiptWriter
from proctor.runtime.records.receipts import ReceiptStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PKG = "sha256:" + "ab" * 32


def _clock() -> datetime:
    return T0


def seal(folder: Path, signer: Signer, steps: int, batch: int) -> None:
    writer = ReceiptWriter(ReceiptStore(folder), signer, clock=_clock, batch=batch)
    refs = []
    for i in range(steps):
        call = writer.call(
            Subject("long", PKG, "main", f"s{i}", "echo"),
            outcome="completed",
            started_at=T0,
            inputs_digest=digest({"i": i}),
            outputs_digest=digest({"i": i}),
        )
        refs.append(
            writer.step(
                Subject("long", PKG, "main", f"s{i}"),
                outcome="completed",
                started_at=T0,
                children=[call],
            )
        )
    writer.run(Subject("long", PKG, "main"), outcome="completed", started_at=T0, children=refs)


def floor(signer: Signer, bodies: list[bytes]) -> None:
    for body in bodies:
        signer.sign(body)


def _timed(fn: Callable[[], None]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def _line(label: str, samples: list[tuple[float, float]], yard: list[tuple[float, float]]) -> None:
    walls = sorted(s[0] for s in samples)
    cpus = sorted(s[1] for s in samples)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    p95 = walls[min(len(walls) - 1, round(0.95 * (len(walls) - 1)))]
    ratio_wall = wall / statistics.median(s[0] for s in yard)
    ratio_cpu = cpu / statistics.median(s[1] for s in yard)
    print(
        f"{label:<40} wall median {wall * 1000:9.1f} ms  p95 {p95 * 1000:9.1f} ms"
        f"  cpu {cpu * 1000:9.1f} ms   {ratio_wall:5.2f}x wall {ratio_cpu:5.2f}x cpu"
    )


def _count_syncs(fn: Callable[[], None]) -> int:
    counted = [0]
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def fsync(fd: int) -> None:
        counted[0] += 1
        real_fsync(fd)

    def fdatasync(fd: int) -> None:
        counted[0] += 1
        real_fdatasync(fd)

    os.fsync, os.fdatasync = fsync, fdatasync  # type: ignore[assignment]
    try:
        fn()
    finally:
        os.fsync, os.fdatasync = real_fsync, real_fdatasync
    return counted[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=4096)
    options = parser.parse_args()
    signer = signer_from_seed(bytes(range(32)))
    # bodies the size of the tree's signed receipts (a step commits one call; the run all steps)
    bodies = [canonical({"n": i, "pad": "x" * 560}) for i in range(options.steps)]
    bodies.append(canonical({"children": ["x" * 140] * options.steps}))
    seals, floors = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(options.rounds):
            floors.append(_timed(lambda: floor(signer, bodies)))
            folder = Path(tmp) / f"r{n}"
            seals.append(_timed(lambda f=folder: seal(f, signer, options.steps, options.batch)))
        last = Path(tmp) / "count"
        syncs = _count_syncs(lambda: seal(last, signer, options.steps, options.batch))
    receipts = 2 * options.steps + 1
    print(f"a {options.steps}-step run: {receipts} receipts, {options.steps + 1} signed")
    _line("yardstick: sign the signed bodies", floors, floors)
    _line("seal into the receipt store (packs)", seals, floors)
    print(
        f"syncs of one seal: {syncs} fsync/fdatasync (batch of {options.batch}; a new store:"
        " its index, its packs folder and the day's first pack are made and synced too)"
    )


if __name__ == "__main__":
    main()

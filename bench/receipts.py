"""Receipt figures: signing rate, and `proctor verify` on a 30,002-receipt tree.

Run: ``.venv/bin/python bench/receipts.py [--runs 3] [--verify-only]``. Prints, each as median
and p95:

* receipts written per second through ``ReceiptWriter`` (canonical body, Ed25519 signature for
  steps, atomic write with fsync into a real store), and signed without the store;
* wall time and peak RSS (``wait4`` high-water of the child process, started by a small
  launcher process so that the figure is the verify's own) of ``proctor verify`` (run
  as a user runs it: the console script beside this interpreter, else ``python -m proctor``;
  the line before the figures says which) on a generated tree of 30,002 receipts, shaped as
  the bound's own reasoning: a run, its step, 10,000 skill calls, each committing a child
  run with one step. Steps and runs are signed (20,002 signatures); calls are amortized. A
  second tree signs every receipt (30,002 signatures) as the worst case;
* the raw Ed25519 verify rate of ``cryptography`` alone, the physical floor for the above: on
  one thread, and on one thread per usable core (``cryptography`` releases the GIL while it
  verifies). The floor printed beside each verify checks exactly the signatures the tree holds
  (each signed receipt's signature over its body bytes, read out of the tree's packs, with the
  same key and library), so the ratio compares like with like. ``proctor verify`` checks
  signatures in batches in helper processes, one per usable core but its own, and in its own
  process between the receipts its walk reads and recognizes; the CPU time printed (user + sys
  of the verify child, its helpers included), and its ratio to the floor's own CPU time, are the
  figures to compare under load, when wall times are noisy. Each tree is verified once untimed
  first (its bytecode written to a cache beside the trees, and the files read once), so every
  timed run is alike.

Targets: verify 30,002 in < 3 s and < 100 MiB. A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from _launch import Launcher
from proctor.receipts.canonical import digest
from proctor.receipts.model import Subject
from proctor.receipts.signing import PublicKey, Signer, signer_from_seed
from proctor.receipts.writer import ReceiptWriter, Ref
from proctor.runtime.records.receipt_packs import PACKS_DIR, body_of, records_of
from proctor.runtime.records.receipts import ReceiptStore
from proctor.runtime.records.signature_pool import usable_cores

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PKG = "sha256:" + "ab" * 32


def _clock() -> datetime:
    return T0


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def build_tree(folder: Path, signer: Signer, *, sign_calls: bool, durable: bool) -> Ref:
    """run -> step -> 10,000 calls -> (child run -> step): 30,002 receipts."""
    writer = ReceiptWriter(
        ReceiptStore(folder, durable=durable), signer, clock=_clock, sign_calls=sign_calls
    )
    calls = []
    for i in range(10_000):
        leaf = writer.step(
            Subject(f"child{i}", PKG, "main", "only"),
            outcome="completed",
            started_at=T0,
            outputs_digest=digest(i),
        )
        run = writer.run(
            Subject(f"child{i}", PKG, "main"), outcome="completed", started_at=T0, children=[leaf]
        )
        calls.append(
            writer.call(
                Subject("parent", PKG, "main", "fan", "skill"),
                outcome="completed",
                started_at=T0,
                inputs_digest=digest({"i": i}),
                children=[run],
            )
        )
    step = writer.step(
        Subject("parent", PKG, "main", "fan"), outcome="completed", started_at=T0, children=calls
    )
    return writer.run(
        Subject("parent", PKG, "main"), outcome="completed", started_at=T0, children=[step]
    )


def writer_rates(signer: Signer, runs: int) -> None:
    class Null:
        def put_many(self, items: object) -> None:
            pass

    for label, store_factory in (
        ("no store", lambda d: Null()),
        ("store, fsync", lambda d: ReceiptStore(d, durable=True)),
    ):
        for kind in ("call", "step"):
            rates, lat = [], []
            for _ in range(runs):
                with tempfile.TemporaryDirectory() as tmp:
                    writer = ReceiptWriter(store_factory(Path(tmp)), signer, clock=_clock)
                    n = 300 if "fsync" in label else 2000
                    start = time.perf_counter()
                    for i in range(n):
                        t = time.perf_counter()
                        getattr(writer, kind)(
                            Subject("s", PKG, "m", "x", "echo"),
                            outcome="completed",
                            started_at=T0,
                            inputs_digest=digest({"i": i}),
                        )
                        lat.append(time.perf_counter() - t)
                    rates.append(n / (time.perf_counter() - start))
            signed = "signed" if kind == "step" else "amortized (unsigned)"
            print(
                f"  {kind} receipts, {signed}, {label}: median {statistics.median(rates):,.0f}/s;"
                f" latency median {statistics.median(lat) * 1e6:.0f} us,"
                f" p95 {_p95(lat) * 1e6:.0f} us"
            )


def _verify_slice(key: PublicKey, messages: list[bytes], sigs: list[bytes]) -> None:
    for m, s in zip(messages, sigs, strict=True):
        key.verify(s, m)


#: Signed messages and their signatures, in two lists.
Signed = tuple[list[bytes], list[bytes]]


def synthetic_signed(signer: Signer, n: int) -> Signed:
    """``n`` messages of 852 bytes (about a receipt body's size) and their signatures."""
    messages = [digest({"i": i}).encode() * 12 for i in range(n)]
    return messages, [signer.sign(m) for m in messages]


def tree_signed(folder: Path) -> Signed:
    """The body bytes and signature of every signed receipt in the folder's packs, each
    receipt once: exactly what ``proctor verify`` of the tree the folder holds checks."""
    seen: set[str] = set()
    messages, sigs = [], []
    for pack in sorted((folder / PACKS_DIR).glob("*.pack")):
        data = pack.read_bytes()
        for hex_id, at, size in records_of(data):
            line = data[at : at + size]
            body = body_of(line)
            signature = json.loads(line)["signature"]
            if hex_id in seen or body is None or signature is None:
                continue
            seen.add(hex_id)
            messages.append(body)
            sigs.append(base64.b64decode(signature))
    return messages, sigs


def _floor_once(signer: Signer, signed: Signed, threads: int = 1) -> tuple[float, float]:
    """Seconds for ``threads`` threads to verify ``signed`` with cryptography alone: wall time,
    and CPU time (user + sys of every thread)."""
    key = signer.public_key
    messages, sigs = signed
    n = len(messages)
    size = -(-n // threads)
    slices = [(messages[i : i + size], sigs[i : i + size]) for i in range(0, n, size)]
    workers = [threading.Thread(target=_verify_slice, args=(key, *part)) for part in slices[1:]]
    start, cpu = time.perf_counter(), time.process_time()
    for worker in workers:
        worker.start()
    _verify_slice(key, *slices[0])
    for worker in workers:
        worker.join()
    return time.perf_counter() - start, time.process_time() - cpu


def proctor_command() -> list[str]:
    """How a user runs proctor: the console script installed beside this interpreter (the
    venv's ``bin/proctor``), else ``python -m proctor`` (whose runpy start costs a few ms)."""
    script = Path(sys.executable).with_name("proctor")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "proctor"]


def verify_runs(
    folder: Path, root: Ref, key_file: Path, runs: int, signer: Signer, launcher: Launcher
) -> None:
    walls, rss, floors, cpus, floor_cpus, loads = [], [], [], [], [], []
    signed = tree_signed(folder)
    signatures = len(signed[0])
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(folder / "no-home")
    # proctor's modules run from their compiled bytecode, as an installed proctor's do: a
    # checkout run with PYTHONDONTWRITEBYTECODE set compiles every module again each time
    # (some 15 ms of a verify); the untimed first run below writes the bytecode here
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(folder.parent / "pycache")
    command = [
        *proctor_command(),
        "verify",
        root.receipt_id,
        "--json",
        "--receipts-dir",
        str(folder),
        "--key",
        str(key_file),
    ]
    launcher.run(command, env)
    for _ in range(runs):
        start = time.perf_counter()
        code, cpu, peak, _, out = launcher.run(command, env)
        walls.append(time.perf_counter() - start)
        # the floor on every usable core, under the same load, measured right after
        floor_wall, floor_cpu = _floor_once(signer, signed, usable_cores())
        loads.append(os.getloadavg()[0])
        floors.append(floor_wall)
        floor_cpus.append(floor_cpu)
        rss.append(peak)
        cpus.append(cpu)  # the helpers it reaped included
        if code != 0:
            print("  verify failed:", out)
    print(
        f"  wall: median {statistics.median(walls):.2f} s, p95 {_p95(walls):.2f} s "
        f"(runs: {', '.join(f'{w:.2f}' for w in walls)})"
    )
    ratios = [w / f for w, f in zip(walls, floors, strict=True)]
    print(
        f"  floor beside it (the tree's {signatures:,} signatures, bare Ed25519 verifies on "
        f"{usable_cores()} threads): "
        "median "
        f"{statistics.median(floors):.2f} s; verify/floor ratio median "
        f"{statistics.median(ratios):.2f}, p95 {_p95(ratios):.2f}"
    )
    print(f"  peak RSS: median {statistics.median(rss):.1f} MiB, p95 {_p95(rss):.1f} MiB")
    print(
        f"  CPU (user+sys, helpers included): median {statistics.median(cpus):.2f} s "
        f"(runs: {', '.join(f'{c:.2f}' for c in cpus)})"
    )
    # on a shared machine the wall ratio follows the load; the CPU ratio much less
    cpu_ratios = [c / f for c, f in zip(cpus, floor_cpus, strict=True)]
    print(
        f"  CPU beside the floor's CPU (median {statistics.median(floor_cpus):.2f} s): ratio "
        f"median {statistics.median(cpu_ratios):.2f}, p95 {_p95(cpu_ratios):.2f} "
        f"(1-minute load average {min(loads):.1f}-{max(loads):.1f})"
    )


def raw_verify_rate(signer: Signer, n: int, runs: int) -> None:
    signed = synthetic_signed(signer, n)
    for threads in sorted({1, usable_cores()}):
        times = [_floor_once(signer, signed, threads)[0] for _ in range(runs)]
        med = statistics.median(times)
        print(
            f"  cryptography Ed25519 verify alone, {threads} thread(s): {n / med:,.0f}/s; "
            f"{n:,} signatures take {med:.2f} s (median), p95 {_p95(times):.2f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--verify-only", action="store_true", help="skip the writing rates")
    args = parser.parse_args()
    launcher = Launcher()  # first, while this process is small (see _launch)
    signer = signer_from_seed(b"\x42" * 32)
    if not args.verify_only:
        print("writing receipts (2,000 per run; 300 with fsync):")
        writer_rates(signer, args.runs)
    print(f"proctor verify runs as: {' '.join(Path(part).name for part in proctor_command())}")
    with tempfile.TemporaryDirectory() as tmp:
        key_file = Path(tmp) / "key.pem"
        key_file.write_text(signer.public_key.pem())
        for sign_calls, label in (
            (False, "amortized calls: 20,002 signed"),
            (True, "every receipt signed: 30,002 signed"),
        ):
            folder = Path(tmp) / ("all" if sign_calls else "amortized")
            start = time.perf_counter()
            root = build_tree(folder, signer, sign_calls=sign_calls, durable=False)
            # the tree is written without fsync: flush it now, so the kernel's writeback of
            # 30,000 new files does not run during (and get timed with) the verifications
            os.sync()
            print(
                f"tree of {root.size:,} receipts, depth {root.height}, {label} "
                f"(built in {time.perf_counter() - start:.1f} s without fsync)"
            )
            verify_runs(folder, root, key_file, args.runs, signer, launcher)
        launcher.close()
        print("physical floor:")
        raw_verify_rate(signer, 20_002, args.runs)
        raw_verify_rate(signer, 30_002, args.runs)


if __name__ == "__main__":
    main()

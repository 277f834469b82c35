#!/usr/bin/env python3
"""proctor beside its three peers, interleaved round by round, with the ratios issue 20 judges.

Run: ``.venv/bin/python bench/peers.py [--rounds 3] [--quick] [--no-setup]``.

Sets up the peers first when missing, exactly as ``../shared/peers/README.md`` says (each in its
own virtualenv under ``.peers/``, pinned versions, never a dependency of proctor; ``.peers/`` is
gitignored): auro-runtime 0.1.0 (with mcp), agent-governance-toolkit-core 5.0.0, tollgate 1.4.0.
The peers' benchmark scripts are read from ``../shared/peers/`` relative to the repository root.

Then, per round, in this order (so every figure of a round is taken minutes apart at most):

  proctor   governed echo and governed 4 KiB fs.read (``bench/admission.py``'s ``governed()``,
            in this process: shipped policies, audit line, run-store commit per call)
  tollgate  ``governed_jsonl`` (full async call + its shipped JSONL sink)
  AGT       ``full_stack_file`` (policy + trust + rings + HMAC-chained file audit)
  auro      ``read_file_small`` (``execute()`` read_file, shipped policies, JSONL audit)
  cold      ``proctor --help`` and ``auro-runtime --help`` alternated (the virtualenvs' own
            entry points, bytecode allowed), median of N each
  hello     ``proctor run examples/hello-world`` wall, median of 10

and prints the round's figures and its ratios; at the end the median of each ratio over the
rounds against its target, and the load average at start and end. The last line is one JSON
object with every figure. A benchmark, not a test: it asserts nothing. Figures taken while
other work shares the cores are noisy: quote the ratios, with the load average beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT.parent / "shared" / "peers"
PEERS = ROOT / ".peers"
PROCTOR = ROOT / ".venv" / "bin" / "proctor"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from admission import governed  # noqa: E402  (bench/ is on the path: see above)

#: name -> (pip requirements, distribution whose version is pinned, pinned version)
PINS: dict[str, tuple[list[str], str, str]] = {
    "auro": (["auro-runtime==0.1.0", "mcp"], "auro-runtime", "0.1.0"),
    "agt": (["agent-governance-toolkit-core==5.0.0"], "agent-governance-toolkit-core", "5.0.0"),
    "tollgate": (["tollgate==1.4.0"], "tollgate", "1.4.0"),
}

#: ratio name -> (target, how it is read)
TARGETS: dict[str, tuple[float, str]] = {
    "echo / tollgate governed_jsonl": (1.0, "ratio"),
    "echo / AGT full_stack_file": (0.5, "ratio"),
    "fs.read 4KiB / auro read_file": (0.25, "ratio"),
    "hello-world run (ms)": (100.0, "ms"),
    "proctor --help / auro --help": (0.3, "ratio"),
}


def _python(name: str) -> Path:
    return PEERS / name / "bin" / "python"


def _installed(name: str, dist: str) -> str | None:
    proc = subprocess.run(
        [str(_python(name)), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def setup() -> None:
    """Create each missing peer virtualenv and install its pinned packages (README steps)."""
    for name, (requirements, dist, version) in PINS.items():
        if not _python(name).exists():
            print(f"setting up .peers/{name}: {' '.join(requirements)}", flush=True)
            subprocess.run([sys.executable, "-m", "venv", str(PEERS / name)], check=True)
            subprocess.run(
                [str(PEERS / name / "bin" / "pip"), "install", "-q", *requirements], check=True
            )
        found = _installed(name, dist)
        if found != version:
            raise SystemExit(f".peers/{name} holds {dist} {found}, not the pinned {version}")


def _last_json(stdout: str) -> dict[str, Any]:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"no JSON line in:\n{stdout[-800:]}")
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def _peer(name: str, argv: list[str]) -> dict[str, Any]:
    proc = subprocess.run([str(_python(name)), *argv], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"peer {name} failed ({proc.returncode}): {proc.stderr[-800:]}")
    return _last_json(proc.stdout)


def _child_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(home)
    # installed copies run from their bytecode: let the warm-up run write it
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _wall_ms(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter_ns()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True)
    wall = (time.perf_counter_ns() - start) / 1e6
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed: {proc.stdout[-400:]!r}{proc.stderr[-400:]!r}")
    return wall


def cold(runs: int, hello_runs: int) -> dict[str, float]:
    """Median wall (ms) of both --help commands (alternated) and of the hello-world run."""
    auro = PEERS / "auro" / "bin" / "auro-runtime"
    with tempfile.TemporaryDirectory(prefix="proctor-peers-") as tmp:
        work = Path(tmp)
        (work / ".proctor").mkdir()
        env = _child_env(work / "home")
        helps = {"proctor --help": [str(PROCTOR), "--help"], "auro --help": [str(auro), "--help"]}
        hello = [str(PROCTOR), "run", str(ROOT / "examples" / "hello-world"), "-i", "message=hi"]
        for argv in (*helps.values(), hello):
            _wall_ms(argv, work, env)  # warm the page cache and write bytecode
        samples: dict[str, list[float]] = {label: [] for label in helps}
        for _ in range(runs):
            for label, argv in helps.items():
                samples[label].append(_wall_ms(argv, work, env))
        out = {label: statistics.median(values) for label, values in samples.items()}
        out["hello-world run"] = statistics.median(
            _wall_ms(hello, work, env) for _ in range(hello_runs)
        )
    return out


def one_round(args: argparse.Namespace) -> dict[str, float]:
    """Every figure of one round (µs per call, ms for the commands)."""
    figures: dict[str, float] = {}
    ours = governed(args.iters, args.warmup)
    figures["proctor echo"] = ours["echo"]["median_us"]
    figures["proctor fs.read 4KiB"] = ours["fs.read 4KiB prose"]["median_us"]
    tg = _peer(
        "tollgate",
        [
            str(SCRIPTS / "tollgate_bench.py"),
            "--iters",
            str(args.iters),
            "--warmup",
            str(args.warmup),
        ],
    )
    figures["tollgate governed_jsonl"] = float(tg["median_us"]["governed_jsonl"])
    agt = _peer(
        "agt",
        [
            "-W",
            "ignore",
            str(SCRIPTS / "agt_bench.py"),
            "--iters",
            str(args.iters),
            "--warmup",
            str(args.warmup),
        ],
    )
    figures["AGT full_stack_file"] = float(agt["median_us"]["full_stack_file"])
    auro = _peer(
        "auro",
        [
            str(SCRIPTS / "auro_bench.py"),
            "--skip-e2e",
            "--skip-mcp",
            "--calls",
            str(args.auro_calls),
            "--runs",
            "1",  # its own cold start: measured below, alternated with proctor's
        ],
    )
    figures["auro read_file"] = float(auro["execute"]["read_file_small"]["median_us"])
    for label, ms in cold(args.cold_runs, args.hello_runs).items():
        figures[f"{label} (ms)"] = ms
    return figures


def ratios(f: dict[str, float]) -> dict[str, float]:
    """The judged ratios of one round's figures (the hello-world run is in ms, not a ratio)."""
    return {
        "echo / tollgate governed_jsonl": f["proctor echo"] / f["tollgate governed_jsonl"],
        "echo / AGT full_stack_file": f["proctor echo"] / f["AGT full_stack_file"],
        "fs.read 4KiB / auro read_file": f["proctor fs.read 4KiB"] / f["auro read_file"],
        "hello-world run (ms)": f["hello-world run (ms)"],
        "proctor --help / auro --help": f["proctor --help (ms)"] / f["auro --help (ms)"],
    }


def _judged_line(label: str, value: float) -> str:
    target, kind = TARGETS[label]
    mark = "ok  " if value <= target else "MISS"
    shown = f"{value:7.1f} ms" if kind == "ms" else f"{value:7.2f}x  "
    unit = " ms" if kind == "ms" else "x"
    return f"  {mark} {label:34s} {shown}  (target <= {target:g}{unit})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer calls per figure: a few minutes")
    ap.add_argument("--no-setup", action="store_true", help="fail rather than set up peers")
    args = ap.parse_args()
    args.iters, args.warmup = (1000, 100) if args.quick else (5000, 500)
    args.auro_calls = 500 if args.quick else 2000
    args.cold_runs = 5 if args.quick else 10
    args.hello_runs = 5 if args.quick else 10
    if not SCRIPTS.is_dir():
        raise SystemExit(f"the peers' scripts are not at {SCRIPTS} (../shared/peers)")
    if not PROCTOR.exists():
        raise SystemExit("no .venv/bin/proctor: create the virtualenv first (see README)")
    if args.no_setup:
        missing = [name for name in PINS if not _python(name).exists()]
        if missing:
            raise SystemExit(f"peers not set up: {', '.join(missing)}")
    else:
        setup()
    load_start = os.getloadavg()
    print(
        f"load average at start: {' '.join(f'{x:.2f}' for x in load_start)} "
        f"on {os.cpu_count()} cpus; {args.rounds} round(s){' (quick)' if args.quick else ''}",
        flush=True,
    )
    rounds: list[dict[str, float]] = []
    judged: list[dict[str, float]] = []
    for n in range(1, args.rounds + 1):
        figures = one_round(args)
        rounds.append(figures)
        judged.append(ratios(figures))
        print(f"round {n} (load {os.getloadavg()[0]:.2f}):", flush=True)
        for label, value in figures.items():
            unit = "ms" if label.endswith("(ms)") else "µs"
            print(f"  {label.removesuffix(' (ms)'):28s} {value:9.1f} {unit}")
        for label, value in judged[-1].items():
            print(_judged_line(label, value))
    load_end = os.getloadavg()
    print(f"median over {args.rounds} round(s):")
    medians: dict[str, float] = {}
    for label in TARGETS:
        medians[label] = statistics.median(r[label] for r in judged)
        print(_judged_line(label, medians[label]))
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in load_end)}")
    print(
        json.dumps(
            {
                "schema": "proctor.bench.peers.v1",
                "rounds": rounds,
                "ratios": judged,
                "median_ratios": medians,
                "targets": {k: v[0] for k, v in TARGETS.items()},
                "loadavg_start": [round(x, 2) for x in load_start],
                "loadavg_end": [round(x, 2) for x in load_end],
                "cpus": os.cpu_count(),
                "quick": args.quick,
            }
        )
    )


if __name__ == "__main__":
    main()

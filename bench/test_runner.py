"""`proctor test` figures: tests per second on a generated 50-test package, and the cold start
of `proctor test` on one test.

    .venv/bin/python bench/test_runner.py [--runs 5] [--cold 20] [--tests 50]

1. throughput: a package of ``--tests`` tests is generated, cycling through five kinds of
   test (an echo and a digest; a file write checked on disk; an HTTP exchange with a fixture
   credential; an answered agent turn and an approval; a refused read of ``.env``). Timed two
   ways, each ``--runs`` times: the whole `proctor test PKG --json` as a subprocess of this
   Python (cold start included), and the runner in this process (warm imports). Printed as
   tests per second and seconds per test, median and p95. Target: 20 tests/s.
2. cold start: `proctor test PKG/tests/ONE.yaml --json` as a subprocess, ``--cold`` times,
   median and p95; beside it, as a peer measured in the same run, `proctor run` of the same
   method (what a test costs over the run it replays).

A benchmark, not a test: it asserts nothing (it exits 1 only if a generated test fails, since
the figures would then measure something else).
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

SKILL_MD = "---\nname: bench\ndescription: A package for the test runner's benchmark.\n---\n"
RUN_YAML = """minimum_proctor: 0.1.0
credentials:
  svc:
    provider: svc
    audience: https://svc.example.com
    auth:
      api_key: {delivery: {env: SVC_TOKEN}}
methods:
  say:
    description: Echo and digest.
    inputs: {type: object, properties: {text: {type: string}}, required: [text]}
    steps:
      - {id: echo, tool: echo, inputs: {text: $input.text}}
      - {id: digest, tool: data.digest, inputs: {value: $input.text}}
    result_from: [echo, digest]
  keep:
    description: Write a file.
    inputs: {type: object, properties: {path: {type: string}, text: {type: string}}}
    steps:
      - id: write
        tool: fs.write
        inputs: {path: $input.path, content: $input.text, create: true}
  fetch:
    description: One HTTP request with a credential.
    inputs: {type: object, properties: {url: {type: string}}}
    steps:
      - id: get
        tool: http.request
        credential: svc
        inputs: {method: GET, url: $input.url}
  draft:
    description: An agent turn, then an approval.
    steps:
      - id: think
        agent:
          instructions: Answer.
          output: {type: object, properties: {answer: {type: string}}, required: [answer]}
      - id: confirm
        ask: {reason: Keep it?}
  read:
    description: Read a file.
    inputs: {type: object, properties: {path: {type: string}}}
    steps:
      - {id: read, tool: fs.read, inputs: {path: $input.path}}
"""

TESTS = [
    """method: say
inputs: {{text: "hello {n}"}}
expect: {{status: sealed, outcome: completed, output: {{subset: {{echo: {{text: "hello {n}"}}}}}},
         receipt: verified}}
""",
    """method: keep
inputs: {{path: "out/{n}.txt", text: "kept {n}"}}
expect: {{status: sealed, outcome: completed, files: {{"out/{n}.txt": {{content: "kept {n}"}}}}}}
""",
    """method: fetch
inputs: {{url: "https://svc.example.com/item/{n}"}}
setup: {{credentials: {{svc: fixture-bench-token-{n:04d}}}}}
providers:
  http:
    - request: {{method: GET, url: "https://svc.example.com/item/{n}"}}
      response: {{status: 200, headers: {{content-type: text/plain}}, body: "item {n}"}}
expect: {{status: sealed, outcome: completed, output: {{subset: {{body: "item {n}"}}}},
         absent: [/headers/authorization], http_request_counts: [1]}}
""",
    """method: draft
host:
  answers: {{think: {{answer: "answer {n}"}}}}
  approvals: {{confirm: true}}
expect: {{status: sealed, outcome: completed, steps: {{think: completed, confirm: completed}}}}
""",
    """method: read
inputs: {{path: .env}}
setup: {{files: {{.env: "X={n}"}}}}
expect: {{status: sealed, outcome: blocked, steps: {{read: {{code: sensitive_path}}}}}}
""",
]


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def package(root: Path, count: int) -> Path:
    (root / ".proctor").mkdir(parents=True)
    folder = root / "skills" / "bench"
    (folder / "tests").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    (folder / "run.yaml").write_text(RUN_YAML)
    for n in range(count):
        text = TESTS[n % len(TESTS)].format(n=n)
        (folder / "tests" / f"t{n:03d}.yaml").write_text(text)
    return folder


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}


def cli(root: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=root,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    return time.perf_counter() - started, out


def _line(label: str, values: list[float], unit: str) -> None:
    print(f"  {label:<44} median {statistics.median(values):8.3f} {unit}   p95 {_p95(values):8.3f}")


def throughput(root: Path, runs: int, count: int) -> None:
    folder = package(root, count)
    rates, per_test = [], []
    for _ in range(runs):
        seconds, out = cli(root, "test", "skills/bench", "--json")
        report = json.loads(out.stdout)
        if out.returncode != 0:
            failed = [t for t in report["tests"] if t["status"] != "passed"]
            print(json.dumps(failed[:3], indent=2))
            sys.exit(1)
        rates.append(count / seconds)
        per_test.append(seconds / count)
    print(f"throughput, {count}-test package")
    _line("proctor test PKG (subprocess): tests/s", rates, "/s")
    _line("proctor test PKG (subprocess): s/test", per_test, "s")
    from proctor.testing.runner import collect, run_cases

    cases = collect(folder)
    run_cases(cases[:5])  # imports and the package read, as the CLI pays once
    warm_rates, warm_each = [], []
    for _ in range(runs):
        started = time.perf_counter()
        results = run_cases(cases)
        seconds = time.perf_counter() - started
        assert all(r.status == "passed" for r in results)
        warm_rates.append(count / seconds)
        warm_each.extend(r.duration_s for r in results)
    _line("runner in process (warm): tests/s", warm_rates, "/s")
    _line("runner in process (warm): s/test, each", warm_each, "s")


def cold_start(root: Path, runs: int) -> None:
    package(root, len(TESTS))
    tests, peers = [], []
    for _ in range(runs):
        seconds, out = cli(root, "test", "skills/bench/tests/t000.yaml", "--json")
        if out.returncode != 0:
            print(out.stdout, out.stderr)
            sys.exit(1)
        tests.append(seconds)
        seconds, out = cli(root, "run", "skills/bench#say", "-i", "text=hello 0", "--json")
        peers.append(seconds)
    print("cold start, one test")
    _line("proctor test PKG/tests/ONE.yaml", tests, "s")
    _line("peer: proctor run of the same method", peers, "s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cold", type=int, default=20)
    parser.add_argument("--tests", type=int, default=50)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}; cores {os.cpu_count()}; {sys.executable}")
    with tempfile.TemporaryDirectory() as tmp:
        throughput(Path(tmp) / "many", args.runs, args.tests)
        cold_start(Path(tmp) / "cold", args.cold)


if __name__ == "__main__":
    main()

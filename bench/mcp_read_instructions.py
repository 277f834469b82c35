"""Instructions per governed ``fs.read`` call of ``proctor mcp --tool fs.read`` over stdio,
counted by callgrind: the server side of bench/mcp_read.py's session figure in a form a shared
machine's load does not move.

    .venv/bin/python bench/mcp_read_instructions.py [--calls 100] [--src PATH] [--keep DIR]
        [--legacy]

The server runs under ``valgrind --tool=callgrind`` with instrumentation off; the official
SDK's client in this process (uninstrumented, as bench/mcp_read.py's; the 2026-07-28 protocol,
its default, or the handshake protocol with ``--legacy``) makes ``WARM`` calls of ``fs_read``
(a 4 KiB file), waits until the session's package is past the racily-clean window (as a
server's is after its first seconds), makes ``WARM`` more, then ``--calls`` calls with
instrumentation on. Prints the instructions per call of each of the server's threads (the
event loop's thread does the call: ``fs.read`` runs on it over stdio) and their sum.
``--src`` counts another checkout's proctor (an earlier commit's ``src``, ``git archive``d);
``--keep`` leaves the callgrind profiles in DIR (``callgrind_annotate`` reads them).
Valgrind knows no ``openat2``: under it, containment takes its portable walk (a few more
instructions than on the kernel path). System calls and the scheduler are not counted:
bench/mcp_read.py measures time. Needs valgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[1]
# this folder holds bench/mcp.py, which would shadow the SDK's ``mcp`` package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
LEGACY = [False]
WARM = 10
RACY_WAIT = 2.2  # seconds: past proctor.runtime.skill_files.RACY_NS, with a margin


def _workspace(tmp: Path, src: Path) -> tuple[Path, dict[str, str]]:
    root = tmp / "ws"
    (root / "data").mkdir(parents=True)
    (root / ".proctor").mkdir()
    line = "The quick brown fox jumps over the lazy dog, and then it reads a file.\n"
    (root / "data" / "a.txt").write_text((line * 64)[:4096])
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(tmp / "home")
    env["PYTHONPATH"] = str(src)
    return root, env


def _per_thread(out: Path) -> list[int]:
    counts = []
    for path in sorted(out.parent.glob(out.name + ".*")):
        text = path.read_text(errors="replace")
        found = re.search(r"^totals:\s+(\d+)", text, re.M) or re.search(
            r"^summary:\s+(\d+)", text, re.M
        )
        if found is not None and int(found.group(1)):
            counts.append(int(found.group(1)))
    return counts


async def measure(src: Path, calls: int, tmp: Path) -> list[int]:
    """The instructions each thread of the server spent on ``calls`` calls."""
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    root, env = _workspace(tmp, src)
    out = tmp / "stdio.cg"
    argv = ["-q", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
            f"--callgrind-out-file={out}.%p", sys.executable, "-m", "proctor", "mcp",
            "--tool", "fs.read"]  # fmt: skip
    server = StdioServerParameters(command="valgrind", args=argv, cwd=str(root), env=env)

    def instrument(flag: str) -> None:
        pid = _valgrind_of_us()
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        subprocess.run(["callgrind_control", "-i", flag, str(pid)], check=True, **quiet)

    async with Client(server, mode="legacy" if LEGACY[0] else "auto") as client:

        async def read() -> None:
            result = await client.call_tool("fs_read", {"path": "data/a.txt"})
            assert not result.is_error, result
            assert result.structured_content["size"] == 4096, result

        for _ in range(WARM):
            await read()
        await anyio.sleep(RACY_WAIT)
        for _ in range(WARM):
            await read()
        instrument("on")
        for _ in range(calls):
            await read()
        instrument("off")
    return _per_thread(out)


def _valgrind_of_us() -> int:
    """The valgrind process this one started (the server under callgrind)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"callgrind" in cmdline:
            return int(entry)
    raise SystemExit("the server under callgrind was not found")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--src", type=Path, default=REPO / "src")
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--legacy", action="store_true")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="proctor-bench-stdio-cg-") as tmp:
        LEGACY[0] = args.legacy
        counts = anyio.run(measure, args.src.resolve(), args.calls, Path(tmp))
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            for path in Path(tmp).glob("stdio.cg.*"):
                shutil.copy(path, args.keep / path.name)
    print(f"proctor mcp --tool fs.read over stdio, {args.calls} calls under callgrind ({args.src})")
    for n, count in enumerate(sorted(counts, reverse=True)):
        print(f"  thread {n}: {count / args.calls:,.0f} instructions a call")
    print(f"  all threads: {sum(counts) / args.calls:,.0f} instructions a call")


if __name__ == "__main__":
    main()

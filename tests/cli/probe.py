"""Running ``proctor.cli.main.main`` in a fresh interpreter, to see what a command loads.

The probe calls ``main(argv)``, catches the ``SystemExit`` it ends with and prints, as the last
line of stderr, ``exit <code> <the named modules that were loaded>``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_PROBE = (
    "import sys\n"
    "from proctor.cli.main import main\n"
    "names = sys.argv[1].split(',') if sys.argv[1] else []\n"
    "try:\n"
    "    main(sys.argv[2:])\n"
    "except SystemExit as exc:\n"
    "    print('exit', exc.code, [m for m in names if m in sys.modules], file=sys.stderr)\n"
)


def probe_cli(cwd: Path, names: tuple[str, ...], *args: str) -> subprocess.CompletedProcess[str]:
    """``proctor <args>`` run by the probe in ``cwd``, with its home in ``cwd/home``."""
    env = {"PROCTOR_HOME": str(cwd / "home"), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", _PROBE, ",".join(names), *args],
        capture_output=True, text=True, env=env, cwd=cwd, check=False, timeout=120,
    )  # fmt: skip

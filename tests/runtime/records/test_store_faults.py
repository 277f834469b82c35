"""Faults in the run store refuse, never forget (issue 31, item 4).

Each case damages a real workspace after a real run, proves the refusal (its code, no step ran,
nothing re-created), then takes the person's recovery step and proves nothing was lost: the run
store still lists the first run, ``proctor audit verify`` passes and the first run's receipt
verifies.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

RUN_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: write
        tool: fs.write
        inputs: {path: touched.txt, content: "ran\\n", create: true}
"""


@pytest.fixture
def root() -> Iterator[Path]:
    """A workspace with one skill, in a folder any user may enter (for the cases that drop
    root's file capabilities)."""
    folder = Path(tempfile.mkdtemp(prefix="proctor-faults-"))
    folder.chmod(0o777)
    ws = folder / "ws"
    skill = ws / "skills" / "toucher"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: toucher\ndescription: Touch a file.\n---\nNo.\n")
    (skill / "run.yaml").write_text(RUN_YAML)
    (ws / ".proctor").mkdir()
    for level in (ws, ws / ".proctor", ws / "skills", skill):
        level.chmod(0o777)
    (folder / "home").mkdir(mode=0o777)
    yield ws
    for level in folder.rglob("*"):
        if level.is_dir() and not level.is_symlink():
            level.chmod(0o777)
    shutil.rmtree(folder, ignore_errors=True)


def _without_file_override() -> None:
    """In the child, before exec: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the
    bounding set, so a root process obeys file modes like any user (prctl PR_CAPBSET_DROP)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def proctor(
    ws: Path, *args: str, obey_modes: bool = False, cwd: Path | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(ws.parent / "home")
    preexec = _without_file_override if obey_modes and os.geteuid() == 0 else None
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=cwd or ws, env=env, capture_output=True, text=True, timeout=120,
        preexec_fn=preexec, input=stdin,
    )  # fmt: skip


def run_ok(ws: Path) -> dict[str, object]:
    (ws / "touched.txt").unlink(missing_ok=True)
    out = proctor(ws, "run", "toucher", "--json")
    assert out.returncode == 0, (out.stdout, out.stderr)
    doc: dict[str, object] = json.loads(out.stdout)
    assert doc["outcome"] == "completed"
    return doc


def nothing_lost(ws: Path, receipt_id: object, runs_at_least: int) -> None:
    """The store lists the runs, the audit log verifies, the receipt verifies."""
    out = proctor(ws, "history", "--json")
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["runs"]) >= runs_at_least
    out = proctor(ws, "audit", "verify")
    assert out.returncode == 0, (out.stdout, out.stderr)
    out = proctor(ws, "verify", str(receipt_id))
    assert out.returncode == 0, (out.stdout, out.stderr)


def _store_files(ws: Path) -> list[Path]:
    return sorted(ws.joinpath(".proctor").glob("runs.sqlite*"))


# -- a missing store --------------------------------------------------------------------------


@pytest.mark.parametrize("keep_mark", [True, False])
def test_a_deleted_store_is_refused_store_missing_and_restored_from_backup(
    root: Path, keep_mark: bool
) -> None:
    first = run_ok(root)
    backup = root.parent / "backup"
    backup.mkdir()
    for file in _store_files(root):
        if file.name != "runs.sqlite-checked":
            shutil.copy2(file, backup / file.name)
        if file.name != "runs.sqlite-checked" or not keep_mark:
            file.unlink()
    (root / "touched.txt").unlink()

    out = proctor(root, "run", "toucher", "--json")
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "error[store_missing]" in out.stderr and "Traceback" not in out.stderr
    assert "proctor store init --new" in out.stderr and str(root) not in out.stderr
    assert not (root / "touched.txt").exists()  # no step ran
    assert not (root / ".proctor" / "runs.sqlite").exists()  # nothing was re-created
    for command in (("audit", "verify"), ("history",), ("check", "--json")):
        out = proctor(root, *command)
        assert out.returncode != 0, (command, out.stdout, out.stderr)
        assert "store_missing" in out.stdout + out.stderr, command
    assert not (root / ".proctor" / "runs.sqlite").exists()

    for file in backup.iterdir():  # the person's recovery: the backup put back
        shutil.copy2(file, root / ".proctor" / file.name)
    second = run_ok(root)
    nothing_lost(root, first["receipt_id"], runs_at_least=2)
    nothing_lost(root, second["receipt_id"], runs_at_least=2)


def test_store_init_new_starts_over_on_purpose_and_is_audited(root: Path) -> None:
    first = run_ok(root)
    for file in _store_files(root):
        file.unlink()
    assert proctor(root, "run", "toucher").returncode == 1
    out = proctor(root, "store", "init")
    assert out.returncode == 2 and "store_init_unconfirmed" in out.stderr

    out = proctor(root, "store", "init", "--new", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == "proctor.store_init.v1" and doc["evidence"]
    lines = (root / ".proctor" / "audit.jsonl").read_text().splitlines()
    started_over = [json.loads(x) for x in lines if '"store_started_over"' in x]
    assert len(started_over) == 1 and started_over[0]["evidence"] == doc["evidence"]

    out = proctor(root, "store", "init", "--new")  # never over a store that is there
    assert out.returncode == 1 and "store_exists" in out.stderr
    run_ok(root)
    nothing_lost(root, first["receipt_id"], runs_at_least=1)


def test_a_fresh_workspace_still_starts_its_store(root: Path) -> None:
    run_ok(root)
    assert (root / ".proctor" / "runs.sqlite").is_file()


# -- a store that cannot be read or written -----------------------------------------------------


def _obeys_modes(path: Path) -> bool:
    if os.geteuid() != 0:
        return True
    probe = subprocess.run(
        [sys.executable, "-c", f"open({str(path)!r}, 'rb')"],
        preexec_fn=_without_file_override, capture_output=True,
    )  # fmt: skip
    return probe.returncode != 0


@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_read_only_store_is_store_unreadable_never_store_corrupt(root: Path, what: str) -> None:
    first = run_ok(root)
    store = root / ".proctor" / "runs.sqlite"
    before = store.read_bytes()
    target = store if what == "file" else store.parent
    mode = target.stat().st_mode & 0o777
    target.chmod(0o444 if what == "file" else 0o555)
    (root / "touched.txt").unlink()
    out = proctor(root, "run", "toucher", "--json", obey_modes=True)
    target.chmod(mode)
    if out.returncode == 0 and os.geteuid() == 0:
        pytest.skip("running as root with capabilities this process cannot drop")
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "error[store_unreadable]" in out.stderr, out.stderr
    assert "store_corrupt" not in out.stderr and "move it aside" not in out.stderr
    assert "Permission denied" in out.stderr or "read-only" in out.stderr
    assert str(root) not in out.stderr and "Traceback" not in out.stderr
    assert not (root / "touched.txt").exists()
    assert store.read_bytes() == before
    run_ok(root)  # the person's recovery: the mode put back
    nothing_lost(root, first["receipt_id"], runs_at_least=2)


def test_an_unreadable_store_is_store_unreadable(root: Path) -> None:
    first = run_ok(root)
    store = root / ".proctor" / "runs.sqlite"
    store.chmod(0o000)
    if not _obeys_modes(store):
        store.chmod(0o600)
        pytest.skip("running as root with capabilities this process cannot drop")
    out = proctor(root, "run", "toucher", "--json", obey_modes=True)
    store.chmod(0o600)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "error[store_unreadable]" in out.stderr and "Permission denied" in out.stderr
    assert "move it aside" not in out.stderr
    run_ok(root)
    nothing_lost(root, first["receipt_id"], runs_at_least=2)


def test_a_workspace_under_an_unsearchable_folder_gives_no_traceback(root: Path) -> None:
    """The workspace sits below a folder with mode 000; a process inside it that obeys file
    modes (root enters first, then the child drops root's file capabilities before it runs
    proctor) gets a refusal naming the cause, not a traceback."""
    if os.geteuid() != 0:
        pytest.skip("needs root to enter the folder before dropping its file capabilities")
    deep = root.parent / "deep"
    ws = deep / "ws"
    shutil.copytree(root, ws)
    for level in (ws, *ws.rglob("*")):
        if level.is_dir():
            level.chmod(0o777)
    deep.chmod(0o000)
    if not _obeys_modes(ws / "skills"):
        deep.chmod(0o755)
        pytest.skip("running as root with capabilities this process cannot drop")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(root.parent / "home")
    try:
        for command in (("run", "toucher"), ("history",), ("audit", "verify"), ("check",)):
            out = subprocess.run(
                [sys.executable, "-m", "proctor", *command], cwd=ws, env=env,
                capture_output=True, text=True, timeout=120,
                preexec_fn=_without_file_override,
            )  # fmt: skip
            assert "Traceback" not in out.stderr, (command, out.stderr)
            assert out.returncode == 2, (command, out.stderr)
            assert "error[workspace_unreachable]" in out.stderr and str(deep) not in out.stderr
    finally:
        deep.chmod(0o755)
    assert not (ws / "touched.txt").exists()


# -- a broken audit log -------------------------------------------------------------------------


def _log(ws: Path) -> Path:
    return ws / ".proctor" / "audit.jsonl"


def _refused_audit_broken(ws: Path) -> None:
    (ws / "touched.txt").unlink(missing_ok=True)
    size = _log(ws).stat().st_size
    out = proctor(ws, "run", "toucher", "--json")
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "error[audit_broken]" in out.stderr and "proctor audit accept-break" in out.stderr
    assert "Traceback" not in out.stderr and str(ws) not in out.stderr
    assert not (ws / "touched.txt").exists()  # no step ran
    assert _log(ws).stat().st_size == size  # and nothing was appended to the broken log


def _accept(ws: Path) -> dict[str, object]:
    out = proctor(ws, "audit", "accept-break", "--note", "seen by a person", "--json")
    assert out.returncode == 0, (out.stdout, out.stderr)
    record: dict[str, object] = json.loads(out.stdout)["recorded"]
    assert record["event"] == "audit_break_accepted" and record["note"] == "seen by a person"
    return record


def test_an_altered_line_stops_runs_until_the_break_is_recorded(root: Path) -> None:
    first = run_ok(root)
    second = run_ok(root)
    lines = _log(root).read_bytes().split(b"\n")
    lines[5] = lines[5].replace(b'"run_id":"', b'"run_id":"x', 1)  # the second run's line
    _log(root).write_bytes(b"\n".join(lines))
    _refused_audit_broken(root)
    assert proctor(root, "audit", "verify").returncode == 1

    record = _accept(root)
    # the last line an intact anchor (the first run's receipt) still vouches for
    assert 0 < record["last_good_line"] < 6  # type: ignore[operator]
    out = proctor(root, "audit", "verify")
    assert out.returncode == 0, out.stdout
    assert "recorded break at line" in out.stdout
    third = run_ok(root)
    for receipt in (first, second, third):
        nothing_lost(root, receipt["receipt_id"], runs_at_least=3)
    assert proctor(root, "audit", "accept-break").stdout.startswith("the audit log verifies")

    # any other damage is still caught: in the set-aside lines, and after the break
    data = _log(root).read_bytes()
    lines = data.split(b"\n")
    altered = list(lines)
    altered[5] = altered[5].replace(b'"event":"', b'"event":"z', 1)
    _log(root).write_bytes(b"\n".join(altered))
    out = proctor(root, "audit", "verify")
    assert out.returncode == 1 and "audit log broken at line" in out.stdout, out.stdout
    _refused_audit_broken(root)
    altered = list(lines)
    altered[-2] = altered[-2].replace(b'"event":"', b'"event":"z', 1)
    _log(root).write_bytes(b"\n".join(altered))
    assert proctor(root, "audit", "verify").returncode == 1
    _log(root).write_bytes(data)
    run_ok(root)


def test_a_cut_log_stops_runs_until_the_break_is_recorded(root: Path) -> None:
    first = run_ok(root)
    run_ok(root)
    lines = _log(root).read_bytes().split(b"\n")
    _log(root).write_bytes(b"\n".join(lines[:4]) + b"\n")  # the tail cut off
    _refused_audit_broken(root)
    record = _accept(root)
    assert record["set_aside_lines"] == 0 and record["excused_anchors"]
    third = run_ok(root)
    nothing_lost(root, first["receipt_id"], runs_at_least=3)
    nothing_lost(root, third["receipt_id"], runs_at_least=3)


def test_a_torn_last_line_is_not_a_break(root: Path) -> None:
    run_ok(root)
    with _log(root).open("ab") as handle:
        handle.write(b'{"schema_version":"1","event_id":"half')
    run_ok(root)
    assert proctor(root, "audit", "verify").returncode == 0


# -- a full disk --------------------------------------------------------------------------------

BIG_YAML = """minimum_proctor: 0.1.0
methods:
  main:
    steps:
      - id: first
        tool: echo
        inputs: {text: one}
      - id: big
        tool: command.execute
        inputs:
          argv: [PY, -c, "print('x' * 3000000)"]
          max_output_bytes: 4000000
      - id: last
        tool: echo
        inputs: {text: three}
"""


def _file_size_limit(limit: int) -> Callable[[], None]:
    def limited() -> None:
        # the run's files may not grow past ``limit`` bytes: writes past it fail (EFBIG) as
        # on a full disk (Python ignores SIGXFSZ, so the write fails rather than the process)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limited


def test_a_full_disk_names_the_run_and_how_to_resume_it(root: Path) -> None:
    first = run_ok(root)
    skill = root / "skills" / "big"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: big\ndescription: Big output.\n---\nNo.\n")
    (skill / "run.yaml").write_text(BIG_YAML.replace("PY", json.dumps(sys.executable)))
    largest = max(p.stat().st_size for p in (root / ".proctor").rglob("*") if p.is_file())
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROCTOR_")}
    env["PROCTOR_HOME"] = str(root.parent / "home")
    out = subprocess.run(
        [sys.executable, "-m", "proctor", "run", "big", "--json"], cwd=root, env=env,
        capture_output=True, text=True, timeout=120,
        preexec_fn=_file_size_limit(largest + 1_000_000),
    )  # fmt: skip
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    assert "error[store_full]" in out.stderr or "error[store_unwritable]" in out.stderr
    error = json.loads(out.stdout)
    run_id = error["details"]["run_id"]
    assert f"proctor resume {run_id} -" in out.stderr

    # the person's recovery: room again, and the resume the message named
    resumed = proctor(root, "resume", run_id, "-", "--json", stdin="{}")
    doc = json.loads(resumed.stdout)
    if resumed.returncode == 10:  # the command's claim is in doubt: a person says resend
        template = doc["answers_template"]
        for address in template["approvals"]:
            template["approvals"][address]["value"] = {"retry": True}
        resumed = proctor(root, "resume", run_id, "-", "--json", stdin=json.dumps(template))
        doc = json.loads(resumed.stdout)
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert (doc["status"], doc["outcome"]) == ("sealed", "completed")
    nothing_lost(root, first["receipt_id"], runs_at_least=2)
    nothing_lost(root, doc["receipt_id"], runs_at_least=2)

"""``proctor verify``'s click-free reader: whatever it accepts, click reads the same way (its
path checks included), everything else goes to click, and a plain verify never imports click
nor cryptography's serialization module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.cli.verify import verify
from proctor.cli.verifying import VERIFY_OPTIONS, parse_verify_argv
from tests.cli.probe import probe_cli

_FLAGS = [flag for _name, flags, _kind, _m, _h in VERIFY_OPTIONS for flag in flags]


def _click_reads(args: list[str]) -> dict[str, object] | None:
    try:
        return dict(verify.make_context("verify", list(args)).params)
    except (click.exceptions.Exit, click.ClickException):
        return None


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Relative names of a file, a folder, a missing path and (unless root) an unreadable file
    and folder, in a fresh current folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    for name, make in (("uf", lambda p: p.write_text("x")), ("ud", lambda p: p.mkdir())):
        make(tmp_path / name)
        (tmp_path / name).chmod(0)
    return ["f", "d", "missing", "uf", "ud", "d/", "f/x", ""]


def test_what_the_reader_accepts_click_reads_the_same(places: list[str]) -> None:
    tokens = [*_FLAGS, *places, "-h", "--help", "--", "-", "--json=1", "--key=f", "--key=d",
              "--receipts-dir=d", "--receipts-dir=f", "--nope", "--ke", "-x", "sha:ab"]  # fmt: skip

    @settings(max_examples=800, deadline=None)
    @given(st.lists(st.one_of(st.sampled_from(tokens), st.text(max_size=3)), max_size=7))
    def check(args: list[str]) -> None:
        fast = parse_verify_argv(args)
        if fast is not None:
            assert fast == _click_reads(args)

    check()


@pytest.mark.parametrize(
    "args",
    [
        ["sha256:ab", "--json"],
        ["--json", "r", "--key", "f", "--receipts-dir", "d"],
        ["r", "--key=missing", "--receipts-dir=missing", "--json", "--json"],
        ["r", "--key", "d", "--key", "f"],  # the last one given is the one checked
        ["-"],
    ],
)
def test_plain_command_lines_are_read_without_click(args: list[str], places: list[str]) -> None:
    fast = parse_verify_argv(args)
    assert fast is not None and fast == _click_reads(args)


@pytest.mark.parametrize(
    "args",
    [[], ["a", "b"], ["r", "--help"], ["r", "--json=yes"], ["r", "--key"], ["r", "--", "x"]],
)
def test_everything_else_is_left_to_click(args: list[str]) -> None:
    assert parse_verify_argv(args) is None


@pytest.mark.parametrize(
    "args",
    [
        ["r", "--key", "d"],  # a folder where click takes a file
        ["r", "--receipts-dir", "f"],  # a file where click takes a folder
        ["r", "--key", "f", "--key", "d"],  # the last one given is the one checked
    ],
)
def test_a_path_click_refuses_is_left_to_click(args: list[str], places: list[str]) -> None:
    assert parse_verify_argv(args) is None
    assert _click_reads(args) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 0")
def test_an_unreadable_path_is_left_to_click(places: list[str]) -> None:
    for args in (["r", "--key", "uf"], ["r", "--receipts-dir", "ud"]):
        assert parse_verify_argv(args) is None
        assert _click_reads(args) is None


def test_a_plain_verify_loads_neither_click_nor_the_pem_reader(tmp_path: Path) -> None:
    """Nor the strict receipt parser (the recognizer takes proctor's receipts) nor the signing
    key machinery (the key is named), nor pathlib (with urllib.parse and ipaddress, a tenth of
    verify's start) nor the receipt store's module (the folder is named)."""
    from proctor.receipts.signing import signer_from_seed

    key = tmp_path / "key.pem"
    key.write_text(signer_from_seed(b"\x09" * 32).public_key.pem())
    (tmp_path / "r").mkdir()
    heavy = (
        "click",
        "cryptography.hazmat.primitives.serialization",
        "proctor.parser.yaml_strict",
        "proctor.receipts.model",
        "proctor.runtime.home.keys",
        "pathlib",
        "urllib.parse",
        "ipaddress",
        "proctor.runtime.records.receipts",
    )

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return probe_cli(tmp_path, heavy, *args)

    missing = "sha256:" + "a" * 64
    done = cli("verify", missing, "--json", "--key", str(key), "--receipts-dir", "r")
    assert done.stderr.splitlines()[-1] == "exit 1 []", done.stderr
    assert '"reason": "not_found"' in done.stdout
    refused = cli("verify", missing, "--receipts-dir", str(key))
    assert refused.stderr.splitlines()[-1].startswith("exit 2 ['click'")
    assert "is a file" in refused.stderr


def test_ctrl_c_ends_a_plain_command_as_click_ends_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import proctor.cli.verifying as verifying
    from proctor.cli.main import main

    def interrupted(**params: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(verifying, "verify_command", interrupted)
    with pytest.raises(SystemExit) as info:
        main(["verify", "sha256:" + "a" * 64, "--json"])
    assert info.value.code == 130
    assert capsys.readouterr().err == "\nAborted.\n"


def test_a_verify_process_ends_once_its_output_is_out(tmp_path: Path) -> None:
    """The console script's plain verify skips the interpreter's teardown of its modules (an
    object of ``__main__`` is never finalized) but not its atexit handlers, its output and exit
    status whole; called with argv, main returns as ever."""
    from proctor.receipts.signing import signer_from_seed

    key = tmp_path / "key.pem"
    key.write_text(signer_from_seed(b"\x0a" * 32).public_key.pem())
    (tmp_path / "r").mkdir()
    missing = "sha256:" + "b" * 64
    args = ["verify", missing, "--json", "--key", str(key), "--receipts-dir", "r"]
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('atexit', file=sys.stderr))\n"
        "class Kept:\n"
        "    def __del__(self):\n"
        "        sys.stderr.write('teardown\\n')\n"
        "kept = Kept()\n"
        "from proctor.cli.main import main\n"
        "if sys.argv[1] == 'own':\n"
        "    sys.argv[1:] = sys.argv[2:]\n"
        "    main()\n"
        "try:\n"
        "    main(sys.argv[2:])\n"
        "except SystemExit as exc:\n"
        "    print('exit', exc.code, file=sys.stderr)\n"
    )
    env = {"PROCTOR_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}

    def cli(how: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", probe, how, *args],
            capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
        )  # fmt: skip

    runs = {how: cli(how) for how in ("own", "given")}
    own, given = runs["own"], runs["given"]
    assert (own.returncode, own.stderr) == (1, "atexit\n")
    assert (given.returncode, given.stderr) == (0, "exit 1\natexit\nteardown\n")
    assert own.stdout == given.stdout and '"reason": "not_found"' in own.stdout


def test_the_walk_loads_without_dataclasses() -> None:
    """The modules a verification walks with, its result's class included, load neither
    dataclasses nor inspect (proctor's value classes are proctor.contracts.values)."""
    probe = (
        "import sys\n"
        "import proctor.receipts.verify, proctor.runtime.records.verify_folder\n"
        "import proctor.runtime.records.folder_reader, proctor.runtime.home.public_key_file\n"
        "import proctor.runtime.records.signature_processes, proctor.cli.verifying\n"
        "from proctor.receipts.verify import VerifyResult\n"
        "print('dataclasses' in sys.modules, 'inspect' in sys.modules, VerifyResult.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["False", "False", "VerifyResult"]


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "sha256:" + "a" * 64, "--key", "\x00", "--json"],
        ["verify", "sha256:" + "a" * 64, "--receipts-dir", "r\x00", "--json"],
        ["run", "examples/hello-world\x00", "--json"],
        ["audit", "verify", "--json", "\x00"],
    ],
)
def test_an_argument_with_a_nul_byte_is_a_usage_error(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # click.Path would stat it and raise ValueError; no command reads it.
    from proctor.cli.main import main

    with pytest.raises(SystemExit) as ended:
        main(args)
    assert ended.value.code == 2
    out, err = capsys.readouterr()
    assert '"code": "argument_nul"' in out and "error[argument_nul]" in err
    assert "Traceback" not in err

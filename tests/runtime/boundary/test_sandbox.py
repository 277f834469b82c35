"""The sandbox API: settings, the probe, the bubblewrap command line, the receipt's field."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from proctor.errors import ConfigError, ReceiptInvalid, RefusedCall
from proctor.receipts.model import Subject, parse_envelope
from proctor.receipts.signing import signer_from_seed
from proctor.receipts.writer import ReceiptWriter
from proctor.runtime.boundary.netrelay import Relay
from proctor.runtime.boundary.sandbox import (
    SandboxSetting,
    SandboxSpec,
    SandboxUse,
    bwrap_argv,
    probe,
    sandbox_setting,
    stricter,
)
from proctor.runtime.boundary.sandbox_check import sandbox_for_call
from proctor.runtime.boundary.sandbox_paths import run_sandbox
from proctor.runtime.boundary.workspace import Workspace
from tests.runtime.boundary.sandbox_support import BWRAP, needs_bwrap


def test_the_mode_comes_from_the_setting_else_the_default() -> None:
    assert sandbox_setting({}, default="auto").mode == "auto"
    assert sandbox_setting({}).mode == "required"
    explicit = sandbox_setting({"PROCTOR_SANDBOX": " OFF "}, default="required")
    assert explicit.mode == "off" and explicit.explicit


@pytest.mark.parametrize(
    "environ",
    [{"PROCTOR_SANDBOX": "sometimes"}, {"PROCTOR_BWRAP": "bwrap"}, {"PROCTOR_SANDBOX": "0"}],
)
def test_a_bad_setting_is_refused(environ: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as caught:
        sandbox_setting(environ)
    assert caught.value.code == "sandbox_setting_invalid"


def test_stricter_keeps_the_strictest_known_mode() -> None:
    assert stricter("auto", "required") == "required"
    assert stricter("required", "auto") == "required"
    assert stricter("auto", None) == "auto"
    assert stricter("auto", "nonsense") == "auto"


def test_the_probe_says_why_bubblewrap_is_unavailable(tmp_path: Path) -> None:
    missing = probe(str(tmp_path / "bwrap"))
    assert not missing.available and str(tmp_path) not in missing.reason
    fake = tmp_path / "fake-bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: no namespaces for you' >&2\nexit 1\n")
    fake.chmod(0o755)
    broken = probe(str(fake))
    assert not broken.available and "no namespaces for you" in broken.reason
    assert probe(str(fake)) is broken  # probed once per process
    assert not probe(None).available


def test_required_refuses_auto_falls_back_off_never_probes(tmp_path: Path) -> None:
    gone = str(tmp_path / "bwrap")
    with pytest.raises(RefusedCall) as caught:
        sandbox_for_call(SandboxSetting("required", bwrap=gone), network=False)
    assert caught.value.code == "sandbox_unavailable"
    auto = sandbox_for_call(SandboxSetting("auto", bwrap=gone), network=False)
    assert auto.used == "none" and auto.trust == "trusted_host_process" and auto.network
    off = sandbox_for_call(SandboxSetting("off", explicit=True, bwrap=gone), network=False)
    assert off.trust == "sandbox_disabled"
    assert SandboxUse.from_record(auto.to_record()) == auto
    assert SandboxUse.from_record({"used": "maybe", "mode": "auto"}) is None


def test_the_command_line_orders_mounts_and_isolates(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".proctor").mkdir(parents=True)
    (ws / "policies").mkdir()
    (ws / ".env").write_text("X=1\n")
    spec, _ = run_sandbox(
        Workspace(ws),
        environ={"PROCTOR_HOME": str(ws / ".home")},
        env={"PATH": "/usr/bin", "TMPDIR": "/somewhere"},
        cwd=ws,
        network=False,
    )
    assert spec.env["TMPDIR"] == "/tmp"
    argv = bwrap_argv(spec, ["true"], bwrap="bwrap")
    text = " ".join(argv)
    for flag in ("--unshare-pid", "--unshare-net", "--die-with-parent", "--new-session"):
        assert flag in argv
    assert "--cap-drop ALL" in text and "--proc /proc" in text
    # an allowlist: the host's / is never bound, the system folders are, read-only, and the
    # sandbox's own root is made read-only last
    assert "--ro-bind / /" not in text and "--ro-bind /usr /usr" in text
    assert argv[argv.index("--chdir") - 2 : argv.index("--chdir")] == ["--remount-ro", "/"]
    bind = text.index(f"--bind {ws} {ws}")
    assert bind < text.index(f"--ro-bind {ws}/policies {ws}/policies")
    assert bind < text.index(f"--tmpfs {ws}/.proctor") < text.index(f"--remount-ro {ws}/.proctor")
    assert bind < text.index(f"--ro-bind /dev/null {ws}/.env")
    assert (ws / ".home").is_dir()  # created so it can be hidden
    assert argv[-2:] == ["--", "true"]
    # an egress grant never shares the host's network: the proxy's folder is bound in and
    # the program runs under the relay that reaches it
    relay = Relay(ws / "px", egress=True, publish=(8080,))
    proxied = bwrap_argv(SandboxSpec(cwd=ws, network=True), ["true"], bwrap="bwrap", relay=relay)
    assert "--unshare-net" in proxied
    assert " ".join(proxied).index(f"--bind {ws}/px /tmp/.proctor-egress") > 0
    wrapped = proxied[proxied.index("--chdir") + 3 :]
    assert wrapped[3].endswith("egress_forwarder.py")
    assert wrapped[4:] == ["/tmp/.proctor-egress", "--egress", "--publish", "8080", "--", "true"]


@needs_bwrap
def test_bubblewrap_works_here() -> None:
    assert probe(BWRAP).available


def _call_receipt(sandbox: dict[str, object] | None, kind: str = "call") -> bytes:
    store: list[bytes] = []

    class Sink:
        def put_many(self, items: list[tuple[str, bytes, str, str]]) -> None:
            store.extend(item[1] for item in items)

    now = datetime(2026, 1, 2, tzinfo=UTC)
    writer = ReceiptWriter(Sink(), signer_from_seed(bytes(32)), clock=lambda: now)
    subject = Subject("s", None, "m", "step", "command.execute")
    writer.write(kind, subject, outcome="completed", started_at=now, sandbox=sandbox)
    writer.flush()
    return store[0]


def test_a_call_receipt_records_its_sandbox_and_parses_strictly() -> None:
    data = _call_receipt({"used": "bubblewrap", "mode": "required", "network": False})
    assert parse_envelope(data).body["sandbox"]["used"] == "bubblewrap"
    assert "sandbox" not in parse_envelope(_call_receipt(None)).body
    bad = data.replace(b'"used":"bubblewrap"', b'"used":"chroot"')
    with pytest.raises(ReceiptInvalid):
        parse_envelope(bad)
    assert hashlib.sha256(bad).digest() != hashlib.sha256(data).digest()


def test_a_call_receipt_names_the_destinations_its_process_reached() -> None:
    reached = [{"host": "pypi.example", "port": 443, "address": "192.0.2.7"}]
    data = _call_receipt(
        {"used": "bubblewrap", "mode": "required", "network": True, "destinations": reached}
    )
    assert parse_envelope(data).body["sandbox"]["destinations"] == reached
    for bad in (
        data.replace(b'"network":true', b'"network":false'),  # no grant, nothing reached
        data.replace(b'"port":443', b'"port":"443"'),
        data.replace(b'"address":"192.0.2.7"', b'"ip":"192.0.2.7"'),
    ):
        with pytest.raises(ReceiptInvalid):
            parse_envelope(bad)


def test_only_call_receipts_carry_a_sandbox() -> None:
    from proctor.errors import UsageError

    with pytest.raises(UsageError, match="sandbox"):
        _call_receipt({"used": "none", "mode": "auto", "network": True}, kind="step")


def test_the_sweep_keeps_what_proctor_adds_to_its_state_folder_meanwhile(tmp_path: Path) -> None:
    # Another run seals (or a sibling child takes a lock) while a command runs: the new entries
    # in .proctor/ are proctor's own, since the folder is hidden whole inside the sandbox; the
    # sweep must not remove them. An authority file the process could have made is still swept.
    ws = tmp_path / "ws"
    (ws / ".proctor").mkdir(parents=True)
    spec, sweep = run_sandbox(
        Workspace(ws),
        environ={"PROCTOR_HOME": str(tmp_path / "home")},
        env={"PATH": "/usr/bin"},
        cwd=ws,
        network=False,
    )
    assert ws / ".proctor" in spec.hidden
    (ws / ".proctor" / "receipts").mkdir()  # made by proctor in another process
    (ws / ".proctor" / "locks").mkdir()
    (ws / "proctor.toml").write_text("[egress]\n")  # made by the process: swept
    removed = sweep.run()
    assert removed == ["proctor.toml"]
    assert (ws / ".proctor" / "receipts").is_dir() and (ws / ".proctor" / "locks").is_dir()

"""Credential profiles at rest, bindings, and resolution order, audience and ambiguity."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from proctor.contracts.skill import CredentialRequirement
from proctor.errors import CredentialError
from proctor.runtime.boundary.sanitize import TaintSet
from proctor.runtime.home.credentials import (
    CredentialStore,
    bind_provider,
    bind_skill,
    normalize_audience,
    readiness,
    resolve_credentials,
    snapshot_environment,
)

CANARY = "canary-7f3a9c1e5b2d4f60a8e1"


def _req(
    provider: str = "tracker", audience: str | None = None, **modes: str
) -> CredentialRequirement:
    auth = {
        mode: {"delivery": {"env": env}}
        for mode, env in (modes or {"api_key": "TRACKER_TOKEN"}).items()
    }
    return CredentialRequirement.model_validate(
        {"provider": provider, "audience": audience, "auth": auth}
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def _all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_material_is_encrypted_at_rest_and_metadata_has_none(home: Path) -> None:
    store = CredentialStore(home)
    store.set("tracker", "work", CANARY, auth_mode="api_key")
    everything = _all_bytes(home)
    assert CANARY.encode() not in everything
    config = json.loads((home / "config.json").read_text())
    assert config["credentials"]["profiles"]["work"]["provider"] == "tracker"
    assert config["credentials"]["defaults"] == {"tracker": "work"}
    assert os.stat(home / "credentials.key").st_mode & 0o777 == 0o600
    assert os.stat(home / "credentials" / "work.json").st_mode & 0o777 == 0o600
    assert store.material("work").reveal() == CANARY
    assert CANARY not in repr(store.material("work"))


def test_wrong_home_key_fails_closed(home: Path) -> None:
    store = CredentialStore(home)
    store.set("tracker", "work", CANARY)
    (home / "credentials.key").write_bytes(os.urandom(32))
    with pytest.raises(CredentialError) as caught:
        store.material("work")
    assert caught.value.code == "credential_decrypt_failed"
    assert CANARY not in caught.value.message


def test_material_moved_to_another_profile_does_not_decrypt(home: Path) -> None:
    store = CredentialStore(home)
    store.set("tracker", "a", CANARY)
    store.set("tracker", "b", "other-value-123456")
    (home / "credentials" / "b.json").write_bytes((home / "credentials" / "a.json").read_bytes())
    with pytest.raises(CredentialError) as caught:
        store.material("b")
    assert caught.value.code == "credential_decrypt_failed"


def test_key_readable_by_others_is_refused(home: Path) -> None:
    store = CredentialStore(home)
    store.set("tracker", "work", CANARY)
    os.chmod(home / "credentials.key", 0o644)
    with pytest.raises(CredentialError) as caught:
        store.material("work")
    assert caught.value.code == "credential_key_permissions"
    with pytest.raises(CredentialError):
        store.set("tracker", "again", CANARY)
    assert store.get("again") is None


def test_list_and_remove_never_show_material(home: Path) -> None:
    store = CredentialStore(home)
    store.set("tracker", "work", CANARY, audience="https://Tracker.Example.com:443/")
    listed = [p.to_dict() for p in store.list()]
    assert listed == [
        {
            "profile": "work",
            "provider": "tracker",
            "auth_mode": None,
            "audience": "https://tracker.example.com",
            "backend": "file",
            "default": True,
            "packages": [],
        }
    ]
    store.remove("work")
    assert store.list() == []
    assert not (home / "credentials" / "work.json").exists()
    with pytest.raises(CredentialError):
        store.remove("work")


@pytest.mark.parametrize(
    "bad", ["http://x.example", "https://x.example/path", "https://u@x.example", "x.example"]
)
def test_audience_must_be_an_https_origin(bad: str) -> None:
    with pytest.raises(CredentialError):
        normalize_audience(bad)


TRIAGE = "local:skills/triage"


def _resolve(
    ws: Path,
    home: Path,
    reqs: dict[str, CredentialRequirement],
    *,
    environ: dict[str, str] | None = None,
    **kw: object,
) -> dict[str, object]:
    env = snapshot_environment(ws, environ or {})
    store = CredentialStore(home)
    for stored in store.list():  # these tests are about order: every profile is bound to triage
        store.bind_package(stored.name, TRIAGE)
    out = resolve_credentials(
        reqs, skill="triage", workspace_root=ws, env=env, store=store, identity=TRIAGE, **kw
    )  # type: ignore[arg-type]
    return {k: (v.source, v.profile, v.secret.reveal()) for k, v in out.items()}


def test_resolution_order(ws: Path, home: Path) -> None:
    reqs = {"tracker": _req()}
    store = CredentialStore(home)
    (ws / ".env").write_text("TRACKER_TOKEN=from-dotenv-value\n")
    assert _resolve(ws, home, reqs) == {"tracker": ("dotenv", None, "from-dotenv-value")}
    assert _resolve(ws, home, reqs, environ={"TRACKER_TOKEN": "from-process-env"}) == {
        "tracker": ("env", None, "from-process-env")
    }
    assert (
        _resolve(ws, home, reqs, host_secrets={"tracker": "from-host-handle"})["tracker"][0]
        == "host"
    )
    store.set("tracker", "default-profile", "from-default")
    assert _resolve(ws, home, reqs, host_secrets={"tracker": "x"})["tracker"][:2] == (
        "default",
        "default-profile",
    )
    store.set("tracker", "bound", "from-binding")
    store.set("tracker", "default-profile", "from-default")  # default again
    bind_provider(ws, "bound", "tracker")
    assert _resolve(ws, home, reqs)["tracker"][:2] == ("binding", "bound")
    store.set("tracker", "skill-bound", "from-skill-binding")
    bind_skill(ws, "skill-bound", "triage", "tracker")
    assert _resolve(ws, home, reqs)["tracker"] == ("binding", "skill-bound", "from-skill-binding")
    store.set("tracker", "explicit", "from-explicit")
    assert _resolve(ws, home, reqs, profile="explicit")["tracker"] == (
        "profile",
        "explicit",
        "from-explicit",
    )


def test_bindings_file_holds_names_only(ws: Path, home: Path) -> None:
    CredentialStore(home).set("tracker", "work", CANARY)
    bind_provider(ws, "work", "tracker")
    bind_skill(ws, "work", "triage", "tracker")
    text = (ws / ".proctor" / "credentials.json").read_text()
    assert CANARY not in text
    assert json.loads(text) == {
        "providers": {"tracker": "work"},
        "skills": {"triage": {"tracker": "work"}},
    }


def test_dotenv_is_data_and_process_env_wins(ws: Path) -> None:
    (ws / ".env").write_text("A=from-file\nB=$(touch pwned)\nC=${A}\n")
    snap = snapshot_environment(ws, {"A": "from-process"})
    assert snap.get("A") == "from-process" and snap.origins["A"] == "env"
    assert snap.get("B") == "$(touch pwned)" and snap.origins["B"] == "dotenv"
    assert snap.get("C") == "${A}"
    assert not (ws / "pwned").exists()


def test_two_declared_values_without_profile_is_ambiguous(ws: Path, home: Path) -> None:
    reqs = {"tw": _req("twitter", oauth1_user="TW_USER", bearer="TW_BEARER")}
    with pytest.raises(CredentialError) as caught:
        _resolve(ws, home, reqs, environ={"TW_USER": "u-value-123", "TW_BEARER": CANARY})
    assert caught.value.code == "credential_ambiguous"
    assert CANARY not in caught.value.message
    CredentialStore(home).set("twitter", "app", "bearer-value-1", auth_mode="bearer")
    CredentialStore(home).bind_package("app", TRIAGE)
    out = resolve_credentials(
        reqs,
        skill="s",
        workspace_root=ws,
        store=CredentialStore(home),
        env=snapshot_environment(ws, {"TW_USER": "u", "TW_BEARER": "b"}),
        profile="app",
        identity=TRIAGE,
    )
    assert out["tw"].mode == "bearer" and out["tw"].env == "TW_BEARER"


def test_profile_mode_must_be_declared(ws: Path, home: Path) -> None:
    CredentialStore(home).set("tracker", "w", "value-123456", auth_mode="oauth")
    with pytest.raises(CredentialError) as caught:
        _resolve(ws, home, {"tracker": _req()}, profile="w")
    assert caught.value.code == "credential_mode_unsupported"


def test_audience_may_narrow_but_never_widen(ws: Path, home: Path) -> None:
    store = CredentialStore(home)
    store.set("n8n", "narrow", "value-123456", audience="https://n8n.example.com")
    out = resolve_credentials(
        {"n8n": _req("n8n", bearer="N8N_TOKEN")},
        skill="s",
        workspace_root=ws,
        env=snapshot_environment(ws, {}),
        store=store,
    )
    assert out["n8n"].audience == "https://n8n.example.com"
    declared = {"n8n": _req("n8n", audience="https://api.example.com", bearer="N8N_TOKEN")}
    with pytest.raises(CredentialError) as caught:
        resolve_credentials(
            declared, skill="s", workspace_root=ws, env=snapshot_environment(ws, {}), store=store
        )
    assert caught.value.code == "credential_audience_mismatch"
    store.set("n8n", "same", "value-123456", audience="https://API.example.com/")
    out = resolve_credentials(
        declared, skill="s", workspace_root=ws, env=snapshot_environment(ws, {}), store=store
    )
    assert out["n8n"].audience == "https://api.example.com"


def test_missing_credential_reports_setup_commands_and_readiness(ws: Path, home: Path) -> None:
    reqs = {"tracker": _req(audience="https://tracker.example.com")}
    with pytest.raises(CredentialError) as caught:
        _resolve(ws, home, reqs)
    assert caught.value.code == "needs_credential"
    (entry,) = caught.value.details["readiness"]
    assert entry["setup"] == [
        "printf '%s' \"$TRACKER_TOKEN\" | proctor credential set tracker --profile tracker "
        "--audience https://tracker.example.com --from-stdin"
    ]
    ready = readiness(
        reqs,
        skill="triage",
        workspace_root=ws,
        env=snapshot_environment(ws, {}),
        store=CredentialStore(home),
    )
    assert [r.ready for r in ready] == [False]
    ready = readiness(
        reqs,
        skill="triage",
        workspace_root=ws,
        store=CredentialStore(home),
        env=snapshot_environment(ws, {"TRACKER_TOKEN": CANARY}),
    )
    assert ready[0].to_dict() == {
        "credential": "tracker",
        "provider": "tracker",
        "audience": "https://tracker.example.com",
        "modes": {"api_key": "TRACKER_TOKEN"},
        "ready": True,
        "source": "env",
        "profile": None,
        "mode": "api_key",
        "problem": None,
        "setup": [],
    }
    assert CANARY not in json.dumps([r.to_dict() for r in ready])


def test_resolved_values_enter_the_taint_set(ws: Path, home: Path) -> None:
    taint = TaintSet()
    resolve_credentials(
        {"tracker": _req()},
        skill="s",
        workspace_root=ws,
        taint=taint,
        env=snapshot_environment(ws, {"TRACKER_TOKEN": CANARY}),
        store=CredentialStore(home),
    )
    assert CANARY in taint
    assert CANARY not in taint.scrub(f"echo {CANARY} back")


def test_keyring_backend(home: Path) -> None:
    pytest.importorskip("keyring")
    store = CredentialStore(home, backend="keyring")
    try:
        store.set("tracker", "kr", CANARY)
    except CredentialError as exc:  # pragma: no cover - no usable OS store on this host
        pytest.skip(exc.message)
    assert CANARY.encode() not in _all_bytes(home)
    assert store.material("kr").reveal() == CANARY
    store.remove("kr")


def test_unknown_backend_is_refused(home: Path) -> None:
    with pytest.raises(CredentialError):
        CredentialStore(home, backend="vault")


def test_a_profile_without_an_audience_goes_only_to_the_packages_it_is_bound_to(
    ws: Path, home: Path
) -> None:
    reqs = {"tracker": _req()}
    store = CredentialStore(home)
    store.set("tracker", "work", CANARY)

    def resolve(identity: str | None) -> dict[str, object]:
        out = resolve_credentials(
            reqs, skill="triage", workspace_root=ws, env=snapshot_environment(ws, {}),
            store=store, identity=identity,
        )  # fmt: skip
        return {k: v.secret.reveal() for k, v in out.items()}

    for identity in (TRIAGE, "local:team/triage", None):
        with pytest.raises(CredentialError) as caught:
            resolve(identity)
        assert caught.value.code == "credential_unbound"
        assert CANARY not in caught.value.message
    ready = readiness(reqs, skill="triage", workspace_root=ws, env=snapshot_environment(ws, {}),
                      store=store, identity=TRIAGE)  # fmt: skip
    assert [(r.ready, r.problem, r.setup) for r in ready] == [
        (False, "credential_unbound", [f"proctor credential bind work {TRIAGE}"])
    ]
    store.bind_package("work", TRIAGE)
    assert resolve(TRIAGE) == {"tracker": CANARY}
    with pytest.raises(CredentialError) as caught:
        resolve("registry:evil/triage")
    assert caught.value.code == "credential_unbound" and TRIAGE in caught.value.message
    store.set("tracker", "work", "rotated-value-123")  # new material keeps the binding
    assert resolve(TRIAGE) == {"tracker": "rotated-value-123"}
    # a profile bound to an audience goes to that host only, whichever package asks
    store.set("tracker", "hosted", "hosted-value-123", audience="https://tracker.example.com")
    assert resolve("local:team/triage") == {"tracker": "hosted-value-123"}
    for bad in ("triage", "core:", "local:a\u202eb", "http:x"):
        with pytest.raises(CredentialError) as caught:
            store.bind_package("work", bad)
        assert caught.value.code == "credential_identity_invalid"

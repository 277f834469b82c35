"""The ``proctor package`` and ``proctor registry`` commands against a loopback registry."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from proctor.cli.main import main
from proctor.registry.server import openapi_document
from tests.registry.conftest import Registry, write_skill


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_publish_search_info_install(
    registry: Registry,
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    skill = write_skill(tmp_path / "summarise")
    key_file = tmp_path / "acme.pem"
    key_file.write_bytes(registry.acme.private_pem())
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    monkeypatch.chdir(root)
    monkeypatch.setenv("PROCTOR_REGISTRY_URL", registry.url)

    code, out, _ = _run(["package", str(skill), "--json"], capsys)
    projected = json.loads(out)
    assert code == 0 and projected["version"] == "1.0.0"

    monkeypatch.setenv("PROCTOR_REGISTRY_TOKEN", registry.acme_token)
    argv = ["registry", "publish", str(skill), "--namespace", "acme", "--key", str(key_file)]
    code, out, err = _run([*argv, "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["manifest"]["content_digest"] == projected["content_digest"]
    assert registry.acme_token not in out + err
    monkeypatch.delenv("PROCTOR_REGISTRY_TOKEN")

    code, out, _ = _run(["registry", "search", "summar"], capsys)
    assert code == 0 and "acme/summarise@1.0.0  [verified]" in out
    code, out, _ = _run(["registry", "info", "acme/summarise", "--json"], capsys)
    assert json.loads(out)["versions"][0]["version"] == "1.0.0"

    code, _, err = _run(["registry", "install", "acme/summarise"], capsys)
    assert code != 0 and "error[registry_untrusted]" in err and "Traceback" not in err
    assert not (root / ".proctor" / "added-skills").exists()

    assert _run(["registry", "trust", registry.store.signer.public_key.raw.hex()], capsys)[0] == 0
    pin = ["--digest", projected["content_digest"]]
    code, out, err = _run(["registry", "install", "acme/summarise@1.0.0", *pin, "--json"], capsys)
    assert code == 0, err
    done = json.loads(out)
    assert done["folder"] == ".proctor/added-skills/acme/summarise/1.0.0"
    assert done["status"] == "installed" and done["tier"] == "verified"
    assert str(tmp_path) not in out

    code, out, _ = _run(["registry", "verify", "acme/summarise"], capsys)
    assert code == 0 and out.startswith("verified acme/summarise@1.0.0 [verified]")
    (root / done["folder"] / "SKILL.md").write_text("---\nname: summarise\n---\nedited\n")
    code, _, err = _run(["registry", "verify", "acme/summarise@1.0.0"], capsys)
    assert code != 0 and "error[package_modified]" in err


def test_bad_cli_input_is_a_clean_error(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PROCTOR_REGISTRY_URL", raising=False)
    for argv, code_name in [
        (["registry", "search", "x"], "registry_url_missing"),
        (
            ["registry", "install", "../etc", "--registry", "http://127.0.0.1:9"],
            "package_name_invalid",
        ),
        (["registry", "trust", "not-a-key"], "public_key_invalid"),
        (["package", str(tmp_path)], "not_a_package"),
    ]:
        code, _, err = _run(argv, capsys)
        assert code != 0 and f"error[{code_name}]" in err, (argv, err)
        assert "Traceback" not in err


def test_the_openapi_document_is_served_and_kept_in_docs(registry: Registry) -> None:
    served = httpx.get(registry.url + "/v1/openapi.json").json()
    assert served == openapi_document()
    docs = Path(__file__).parents[2] / "docs" / "registry-openapi.json"
    assert json.loads(docs.read_text()) == served
    assert set(served["paths"]) >= {"/v1/search", "/v1/packages"}


def test_an_oversized_publish_is_refused_before_it_is_read(registry: Registry) -> None:
    from proctor.registry.server import MAX_BODY_BYTES

    response = httpx.post(
        registry.url + "/v1/packages",
        content=b"x" * (MAX_BODY_BYTES + 1),
        headers={"authorization": f"Bearer {registry.acme_token}"},
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "body_too_large"
    assert registry.store.search("") == []


def test_a_package_below_a_tier_raised_after_its_install_no_longer_runs(
    registry: Registry,
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from proctor.registry.install import install, trust_registry_key, trusted_registry_keys
    from tests.registry.test_journey import _publish

    _publish(registry, write_skill(tmp_path / "notes", name="notes"), namespace="hobby")
    _publish(registry, write_skill(tmp_path / "summarise"), namespace="acme")
    trust_registry_key(registry.store.signer.public_key, os.environ)
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    monkeypatch.chdir(root)
    with registry.client() as client:  # installed while the workspace took any tier
        for ref in ("hobby/notes", "acme/summarise"):
            install(client, ref, workspace_root=root, trusted=trusted_registry_keys(os.environ))
    code, out, _ = _run(["registry", "verify"], capsys)
    assert code == 0 and out.splitlines() == [
        "verified acme/summarise@1.0.0 [verified]",
        "verified hobby/notes@1.0.0 [community]",
    ]

    assert _run(["registry", "require-tier", "verified"], capsys)[0] == 0
    code, _, err = _run(["run", "hobby/notes@1.0.0", "--json"], capsys)
    assert code != 0 and "tier_too_low" in err and "Traceback" not in err
    assert not (root / ".proctor" / "runs.sqlite").exists()  # refused before any run began
    code, out, _ = _run(["registry", "verify", "--json"], capsys)
    doc = json.loads(out)
    assert code == 1 and doc["passed"] is False
    assert {p["ref"]: p.get("code", p["status"]) for p in doc["packages"]} == {
        "acme/summarise@1.0.0": "verified",
        "hobby/notes@1.0.0": "tier_too_low",
    }
    code, out, _ = _run(["registry", "verify"], capsys)
    assert code == 1 and "REFUSED  hobby/notes@1.0.0: [tier_too_low]" in out
    code, _, err = _run(["registry", "verify", "hobby/notes"], capsys)
    assert code != 0 and "error[tier_too_low]" in err

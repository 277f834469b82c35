"""The public Python API is exactly ``proctor.__all__``, imported lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import proctor


def test_all_is_pinned_and_sorted() -> None:
    # adding a public name is a decision: update this list with it
    # the order is ruff's (RUF022: constants, then classes, then functions, each sorted)
    assert proctor.__all__ == [
        "UNRESTRICTED",
        "AgentDriver",
        "Authority",
        "CallOutcome",
        "CallSpec",
        "Governor",
        "ProctorError",
        "RunEnvelope",
        "RunInterrupted",
        "Session",
        "VerifyResult",
        "Workspace",
        "__version__",
        "parse_authority",
        "verify_receipt",
    ]
    for name in proctor.__all__:
        assert getattr(proctor, name) is not None


def test_exports_resolve_to_their_modules() -> None:
    from proctor.policy.evaluate import UNRESTRICTED
    from proctor.receipts.verify import VerifyResult
    from proctor.runtime.engine.session import Session
    from proctor.runtime.records.verify_folder import verify_receipt

    assert proctor.verify_receipt is verify_receipt
    assert proctor.VerifyResult is VerifyResult
    assert proctor.Session is Session
    assert proctor.UNRESTRICTED is UNRESTRICTED


def test_import_proctor_is_lazy() -> None:
    code = (
        "import sys, proctor; "
        "print(any(m.startswith(('proctor.runtime', 'proctor.receipts', 'cryptography')) "
        "for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _governor(tmp_path: Path, policies: object) -> object:
    from proctor.policy import GuardRegistry
    from proctor.runtime.boundary.sanitize import Sanitizer
    from proctor.runtime.records.audit import AuditLog
    from proctor.runtime.records.sqlite import SQLiteRunStore
    from proctor.runtime.tools.registry import native_tools

    return proctor.Governor(
        run_id="r",
        workspace=proctor.Workspace(tmp_path),
        store=SQLiteRunStore(tmp_path / "runs.sqlite"),
        tools=native_tools(),
        policies=policies,  # type: ignore[arg-type]
        guards=GuardRegistry.with_shipped(),
        audit=AuditLog(tmp_path / "audit.jsonl"),
        sanitizer=Sanitizer(),
    )


def test_an_embedding_application_must_name_unrestricted_to_skip_policies(
    tmp_path: Path,
) -> None:
    with pytest.raises(proctor.ProctorError) as refused:
        _governor(tmp_path, None)
    assert refused.value.code == "incomplete_context"
    assert "UNRESTRICTED" in refused.value.message
    governor = _governor(tmp_path, proctor.UNRESTRICTED)
    outcome = governor.call(  # type: ignore[attr-defined]
        proctor.CallSpec(tool="echo", args={"text": "hi"}, allowance=frozenset({"echo"}))
    )
    assert outcome.ok and outcome.result == {"text": "hi"}
    # UNRESTRICTED skips policies only: the tool scope still holds
    refused_call = governor.call(  # type: ignore[attr-defined]
        proctor.CallSpec(tool="fs.read", args={"path": "x"}, allowance=frozenset({"echo"}))
    )
    assert refused_call.status == "refused" and refused_call.code == "tool_not_allowed"
    governor.audit.close()  # type: ignore[attr-defined]
    governor.store.close()  # type: ignore[attr-defined]

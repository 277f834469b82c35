"""The public Python API is exactly ``proctor.__all__``, imported lazily."""

from __future__ import annotations

import subprocess
import sys

import proctor


def test_all_is_pinned_and_sorted() -> None:
    # adding a public name is a decision: update this list with it
    assert proctor.__all__ == ["VerifyResult", "__version__", "verify_receipt"]
    assert proctor.__all__ == sorted(proctor.__all__)
    for name in proctor.__all__:
        assert getattr(proctor, name) is not None


def test_receipt_exports_resolve() -> None:
    from proctor.receipts.verify import VerifyResult
    from proctor.runtime.receipt_store import verify_receipt

    assert proctor.verify_receipt is verify_receipt
    assert proctor.VerifyResult is VerifyResult


def test_import_proctor_is_lazy() -> None:
    code = (
        "import sys, proctor; "
        "print(any(m.startswith(('proctor.runtime', 'proctor.receipts', 'cryptography')) "
        "for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

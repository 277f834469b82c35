"""What telemetry and the engine share without loading an exporter: the semantic-convention
version the spans follow and a run's trace id."""

from __future__ import annotations

import hashlib

__all__ = ["SEMCONV_VERSION", "span_id_of", "trace_id_of"]

SEMCONV_VERSION = "1.37.0"
"""The OpenTelemetry semantic conventions (GenAI included) the spans follow."""


def trace_id_of(run_id: str) -> str:
    """A run's trace id: 32 hex digits, the first 16 bytes of SHA-256 of ``proctor-run:<id>``."""
    return hashlib.sha256(f"proctor-run:{run_id}".encode()).hexdigest()[:32]


def span_id_of(run_id: str, call_id: str) -> int:
    """A call's span id: the first 8 bytes of SHA-256 of ``proctor-call:<run id>/<call id>``,
    so a child run started by the call names its parent span before the call's span is made
    (the call's span ends after its child), in any process."""
    value = int(hashlib.sha256(f"proctor-call:{run_id}/{call_id}".encode()).hexdigest()[:16], 16)
    return value or 1  # zero is not a valid span id

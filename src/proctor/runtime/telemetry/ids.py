"""What telemetry and the engine share without loading an exporter: the semantic-convention
version the spans follow and a run's trace id."""

from __future__ import annotations

import hashlib

__all__ = ["SEMCONV_VERSION", "trace_id_of"]

SEMCONV_VERSION = "1.37.0"
"""The OpenTelemetry semantic conventions (GenAI included) the spans follow."""


def trace_id_of(run_id: str) -> str:
    """A run's trace id: 32 hex digits, the first 16 bytes of SHA-256 of ``proctor-run:<id>``."""
    return hashlib.sha256(f"proctor-run:{run_id}".encode()).hexdigest()[:32]

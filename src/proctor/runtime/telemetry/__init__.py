"""Telemetry: a run's governance events as OpenTelemetry spans and metrics, when asked for.

Owns: :func:`enabled` (``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
is set), :func:`trace_id_of` (in :mod:`.ids`: a run's trace id, derived from its run id so
every process that drives the run, a resume or a worker, adds to the same trace),
:func:`open_observer` (the
observer a session hangs on its audit log) and :mod:`.otel` (that observer, on the official
OpenTelemetry SDK, exporting over OTLP HTTP/protobuf).

The seam is the audit log: every governance event a run makes (start, each admitted or refused
call, pauses, decisions, the seal) already passes through :meth:`AuditLog.emit
<proctor.runtime.records.audit.AuditLog.emit>` once, in order, scrubbed of secrets; an observer
sees each record after it is written. Nothing else in the engine calls telemetry. Without the
endpoint variable no observer exists and no OpenTelemetry module is imported.

Surface: :func:`enabled`, :func:`trace_id_of`, :func:`open_observer`, :class:`Observer`.
Imports nothing of proctor's runtime.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol

from proctor.runtime.telemetry.ids import SEMCONV_VERSION, trace_id_of

__all__ = [
    "ENDPOINT_VARS",
    "SEMCONV_VERSION",
    "Observer",
    "enabled",
    "open_observer",
    "trace_id_of",
]

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


class Observer(Protocol):
    """Sees every audit record after it is written; never raises into the run."""

    def __call__(self, record: Mapping[str, Any]) -> None: ...

    def close(self) -> None:
        """Export what is finished (the exporter itself lives as long as the process)."""
        ...


def enabled(environ: Mapping[str, str]) -> bool:
    """True when an OTLP endpoint is configured (telemetry is off otherwise)."""
    return any(environ.get(name) for name in ENDPOINT_VARS) and (
        environ.get("OTEL_SDK_DISABLED", "").lower() != "true"
    )


def open_observer(environ: Mapping[str, str]) -> Observer | None:
    """The OpenTelemetry observer when :func:`enabled`, else ``None`` (nothing imported).

    Raises:
        ConfigError: (``otel_unavailable``) an endpoint is set but the ``otel`` extra is not
            installed (``pip install 'proctor[otel]'``).
    """
    if not enabled(environ):
        return None
    try:
        from proctor.runtime.telemetry.otel import OtelObserver
    except ImportError as exc:
        from proctor.errors import ConfigError

        raise ConfigError(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed; install"
            " proctor[otel], or unset the variable",
            code="otel_unavailable",
        ) from exc
    key = tuple(environ.get(name, "") for name in _SHARED_BY)
    with _lock:  # one exporter a process: sessions come and go (a console makes one a request)
        held = _observers.get(key)
        if held is None:
            held = _observers[key] = OtelObserver(environ)
        return held


_SHARED_BY = (
    *ENDPOINT_VARS,
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_SERVICE_NAME",
)
_observers: dict[tuple[str, ...], Observer] = {}
_lock = threading.Lock()

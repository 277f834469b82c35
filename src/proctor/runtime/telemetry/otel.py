"""The OpenTelemetry observer: audit records become spans and metrics, exported over OTLP
HTTP/protobuf by the official SDK. Imported only when telemetry is :func:`enabled
<proctor.runtime.telemetry.enabled>`.

Spans (semantic conventions :data:`~proctor.runtime.telemetry.SEMCONV_VERSION`; GenAI names
where one applies, ``proctor.*`` where none does):

- ``invoke_agent {skill}``: the run (or the part of it this process drove: a resumed run adds
  a span to the same trace), from ``run_started`` to ``run_sealed``/``run_paused``; a child
  run's is a child of the parent's call span that started it (a span id derived from the call,
  :func:`~proctor.runtime.telemetry.ids.span_id_of`) or of the parent's ``skill:`` step span,
  in the root's trace;
- ``proctor.step {step}``: a step, parent the run, from its first call's start to its last
  call's end;
- ``execute_tool {tool}``: a call, parent its step, from admission to the settled result; a
  refused call is a span of no length with status error;
- ``chat {model}``: a managed turn's model request, parent its step (``model_request``);
- ``proctor.approval {address}``: the wait for a person's decision, from the pause (when this
  process saw it) to the decision, parent the run.

Attributes come from an allow-list of the audit record's fields (which the audit log has
already scrubbed): never an argument, a result, a message or a path.

Metrics: ``proctor.calls`` (by ``proctor.admission.outcome`` and ``proctor.refusal.code``),
``proctor.approvals`` (by ``proctor.approval.approved``), ``proctor.approval.wait`` (seconds),
``proctor.seals`` (by ``proctor.run.outcome``), ``proctor.spend`` (micro-dollars).
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, Status, StatusCode, TraceFlags

from proctor._version import __version__
from proctor.runtime.telemetry.ids import SEMCONV_VERSION, span_id_of, trace_id_of

__all__ = ["OtelObserver"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"


def _ns(stamp: object, fallback: int) -> int:
    """Nanoseconds since the epoch of an audit timestamp (ISO 8601, UTC)."""
    if not isinstance(stamp, str):
        return fallback
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return fallback
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


class _Ids(IdGenerator):
    """Random span ids; the trace id of a run's first span is the run's own
    (:func:`~proctor.runtime.telemetry.trace_id_of`), set just before it starts."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self.next_trace: int | None = None
        self.next_span: int | None = None

    def generate_span_id(self) -> int:
        chosen, self.next_span = self.next_span, None
        return chosen if chosen is not None else self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        chosen, self.next_trace = self.next_trace, None
        return chosen if chosen is not None else self._random.generate_trace_id()


@dataclass
class _Run:
    span: Span
    step: tuple[object, Span] | None = None
    step_end: int = 0
    attrs: dict[str, Any] = field(default_factory=dict)
    parent: tuple[str, object] | None = None
    """A child run's parent run id and the index of the parent's step that started it."""


def _keep(**values: object) -> dict[str, Any]:
    """Attributes with a value (OpenTelemetry refuses ``None``)."""
    return {k: v for k, v in values.items() if isinstance(v, str | bool | int | float)}


class OtelObserver:
    """Turns each audit record into spans and metrics (see the module docstring).

    Never raises into the run: a record it cannot use is counted in :attr:`failures`.
    """

    def __init__(self, environ: Mapping[str, str]) -> None:
        base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").rstrip("/")
        traces = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or f"{base}/v1/traces"
        metrics = environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or f"{base}/v1/metrics"
        resource = Resource.create(
            {
                "service.name": environ.get("OTEL_SERVICE_NAME") or "proctor",
                "service.version": __version__,
            }
        )
        self._ids = _Ids()
        self._traces = TracerProvider(
            resource=resource, id_generator=self._ids, shutdown_on_exit=False
        )
        self._traces.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces)))
        self._tracer = self._traces.get_tracer("proctor", __version__, schema_url=_SCHEMA_URL)
        self._reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=metrics), export_interval_millis=60_000
        )
        self._metrics = MeterProvider(
            resource=resource, metric_readers=[self._reader], shutdown_on_exit=False
        )
        meter = self._metrics.get_meter("proctor", __version__, schema_url=_SCHEMA_URL)
        self._calls = meter.create_counter("proctor.calls", "{call}", "calls admitted or refused")
        self._approvals = meter.create_counter("proctor.approvals", "{decision}", "decisions")
        self._wait = meter.create_histogram("proctor.approval.wait", "s", "approval wait")
        self._seals = meter.create_counter("proctor.seals", "{run}", "runs sealed")
        self._spend = meter.create_counter("proctor.spend", "u[USD]", "micro-dollars spent")
        self._runs: dict[str, _Run] = {}
        self._paused: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self.failures = 0
        self._pid = os.getpid()
        atexit.register(self._at_exit)  # ends open spans, then shuts the providers down

    # -- the seam --------------------------------------------------------------------------

    def __call__(self, record: Mapping[str, Any]) -> None:
        """Observe one audit record (after it was written)."""
        if os.getpid() != self._pid:
            return  # a forked child never exports its parent's providers
        handler = _HANDLERS.get(str(record.get("event")))
        run_id = record.get("run_id")
        if handler is None or not isinstance(run_id, str):
            return
        try:
            with self._lock:
                handler(self, run_id, record, _ns(record.get("timestamp"), 0))
        except Exception:  # telemetry never breaks a run; the count says it failed
            self.failures += 1

    def close(self) -> None:
        """A session closed: export every finished span and the metrics now. The providers
        live on (other sessions of this process share them) and shut down at exit, ending
        what is still open."""
        if os.getpid() != self._pid:
            return
        self._traces.force_flush()
        self._metrics.force_flush()

    def _at_exit(self) -> None:
        if os.getpid() != self._pid:
            return
        with self._lock:
            for run in self._runs.values():
                self._end_step(run)
                run.span.end()
            self._runs.clear()
        self._traces.shutdown()
        self._metrics.shutdown()

    # -- handlers --------------------------------------------------------------------------

    def _run(self, run_id: str, at: int, record: Mapping[str, Any]) -> _Run:
        run = self._runs.get(run_id)
        if run is not None:
            return run
        skill = record.get("skill")
        context, parent = self._parent_of(record, at)
        self._ids.next_trace = int(trace_id_of(run_id), 16)
        span = self._tracer.start_span(
            f"invoke_agent {skill}" if isinstance(skill, str) else "invoke_agent proctor.run",
            context=context,
            start_time=at,
            attributes=_keep(
                **{
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": skill,
                    "proctor.run.id": run_id,
                    "proctor.run.method": record.get("method"),
                    "proctor.package.digest": record.get("package_digest"),
                    "proctor.run.resumed": record.get("event") != "run_started",
                }
            ),
        )
        self._ids.next_trace = None
        run = self._runs[run_id] = _Run(span, parent=parent)
        return run

    def _parent_of(
        self, record: Mapping[str, Any], at: int
    ) -> tuple[Context | None, tuple[str, object] | None]:
        """A child run's parent span, from the link its start (or continuation) names: the
        call that started it (a span id derived from the call, made when the call settles),
        else the parent's step (opened here when the parent has not opened it yet); the
        trace is the tree's root's. ``(None, None)`` for a root run."""
        parent_run, tree = record.get("parent_run_id"), record.get("tree")
        if not isinstance(parent_run, str) or not isinstance(tree, str):
            return None, None
        index = record.get("parent_step_index")
        call_id = record.get("parent_call_id")
        if isinstance(call_id, str):
            span_context = SpanContext(
                trace_id=int(trace_id_of(tree), 16),
                span_id=span_id_of(parent_run, call_id),
                is_remote=False,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
            return trace.set_span_in_context(NonRecordingSpan(span_context)), (parent_run, index)
        owner = self._run(parent_run, at, {"event": "run_continued", "tree": tree})
        step = self._step(owner, {"step_index": index, "step": record.get("parent_step")}, at, at)
        return trace.set_span_in_context(step), (parent_run, index)

    def _child_ended(self, run: _Run, at: int) -> None:
        """A child run ended: the parent's step that waits on it lasts at least as long."""
        if run.parent is None:
            return
        owner = self._runs.get(run.parent[0])
        if owner is not None and owner.step is not None and owner.step[0] == run.parent[1]:
            owner.step_end = max(owner.step_end, at)

    def _end_step(self, run: _Run) -> None:
        if run.step is not None:
            run.step[1].end(end_time=run.step_end)
            run.step = None

    def _step(self, run: _Run, record: Mapping[str, Any], start: int, end: int) -> Span:
        index = record.get("step_index")
        if run.step is None or run.step[0] != index:
            self._end_step(run)
            step = record.get("step")
            span = self._tracer.start_span(
                f"proctor.step {step}",
                context=trace.set_span_in_context(run.span),
                start_time=start,
                attributes=_keep(**{"proctor.step.id": step, "proctor.step.index": index}),
            )
            run.step = (index, span)
        run.step_end = max(run.step_end, end)
        return run.step[1]

    def _started(self, run_id: str, record: Mapping[str, Any], at: int) -> None:
        self._run(run_id, at, record)

    def _call(self, run_id: str, record: Mapping[str, Any], at: int) -> None:
        run = self._run(run_id, at, record)
        refused = record.get("event") == "call_refused"
        start = at if refused else min(_ns(record.get("started_at"), at), at)
        parent = self._step(run, record, start, at)
        code = record.get("code")
        admission = "refused" if refused else "admitted"
        tool = record.get("tool")
        call_id = record.get("call_id")
        if not refused and isinstance(call_id, str):  # a child it started names this id
            self._ids.next_span = span_id_of(run_id, call_id)
        span = self._tracer.start_span(
            f"execute_tool {tool}",
            context=trace.set_span_in_context(parent),
            start_time=start,
            attributes=_keep(
                **{
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.id": record.get("call_id"),
                    "gen_ai.tool.type": "function",
                    "proctor.admission.outcome": admission,
                    "proctor.call.outcome": "refused" if refused else record.get("outcome"),
                    "proctor.refusal.code": code if refused else None,
                    "proctor.rule.id": record.get("rule_id"),
                    "proctor.effect.class": record.get("effect"),
                    "proctor.step.id": record.get("step"),
                    "error.type": code,
                }
            ),
        )
        self._ids.next_span = None
        if refused or record.get("outcome") != "completed":
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=at)
        self._calls.add(
            1, _keep(**{"proctor.admission.outcome": admission, "proctor.refusal.code": code})
        )

    def _model(self, run_id: str, record: Mapping[str, Any], at: int) -> None:
        run = self._run(run_id, at, record)
        start = min(_ns(record.get("started_at"), at), at)
        parent = self._step(run, record, start, at)
        model = record.get("model")
        span = self._tracer.start_span(
            f"chat {model}" if isinstance(model, str) else "chat",
            context=trace.set_span_in_context(parent),
            start_time=start,
            attributes=_keep(
                **{
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": record.get("provider"),
                    "gen_ai.request.model": model,
                    "gen_ai.usage.input_tokens": record.get("input_tokens"),
                    "gen_ai.usage.output_tokens": record.get("output_tokens"),
                    "proctor.step.id": record.get("step"),
                    "error.type": record.get("code"),
                }
            ),
        )
        if record.get("outcome") != "completed":
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=at)

    def _paused_run(self, run_id: str, record: Mapping[str, Any], at: int) -> None:
        run = self._run(run_id, at, record)
        for request in record.get("requests") or ():
            if isinstance(request, Mapping) and isinstance(request.get("address"), str):
                self._paused[(run_id, request["address"])] = at
        self._end_step(run)
        run.span.set_attribute("proctor.run.status", str(record.get("status") or "paused"))
        run.span.end(end_time=at)
        del self._runs[run_id]
        self._child_ended(run, at)

    def _decided(self, run_id: str, record: Mapping[str, Any], at: int) -> None:
        run = self._run(run_id, at, record)
        address = record.get("address")
        since = self._paused.pop((run_id, str(address)), None)
        if since is None and record.get("waited_since"):  # paused in another process
            since = _ns(record.get("waited_since"), at)
        approved = record.get("approved")
        span = self._tracer.start_span(
            f"proctor.approval {address}",
            context=trace.set_span_in_context(run.span),
            start_time=at if since is None else since,
            attributes=_keep(
                **{
                    "proctor.approval.address": address,
                    "proctor.approval.approved": approved,
                    "proctor.approval.lane": record.get("lane"),
                    "proctor.approval.wait_seen": since is not None,
                }
            ),
        )
        span.end(end_time=at)
        self._approvals.add(1, _keep(**{"proctor.approval.approved": approved}))
        if since is not None:
            self._wait.record(max(0, at - since) / 1e9)

    def _sealed(self, run_id: str, record: Mapping[str, Any], at: int) -> None:
        run = self._run(run_id, at, record)
        self._end_step(run)
        outcome = record.get("outcome")
        run.span.set_attributes(
            _keep(
                **{
                    "proctor.run.outcome": outcome,
                    "proctor.run.seal_reason": record.get("seal_reason"),
                    "proctor.receipt.id": record.get("receipt_id"),
                    "proctor.refusal.code": record.get("code"),
                }
            )
        )
        if outcome != "completed":
            run.span.set_status(Status(StatusCode.ERROR))
        run.span.end(end_time=at)
        del self._runs[run_id]
        self._child_ended(run, at)
        self._seals.add(1, _keep(**{"proctor.run.outcome": outcome}))
        spend = record.get("spend_micro_usd")
        if type(spend) is int and spend > 0:
            self._spend.add(spend)

    def _stopped(self, run_id: str, record: Mapping[str, Any], at: int) -> None:
        run = self._runs.pop(run_id, None)
        if run is not None:
            self._end_step(run)
            run.span.set_attribute("proctor.run.status", "stopped")
            run.span.end(end_time=at)
            self._child_ended(run, at)


_HANDLERS = {
    "run_started": OtelObserver._started,
    "run_continued": OtelObserver._started,
    "tool_call": OtelObserver._call,
    "call_refused": OtelObserver._call,
    "model_request": OtelObserver._model,
    "run_paused": OtelObserver._paused_run,
    "decision_recorded": OtelObserver._decided,
    "run_sealed": OtelObserver._sealed,
    "run_stopped": OtelObserver._stopped,
}

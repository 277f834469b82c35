"""Every model request of a managed turn in the audit log (``model_request``), metered on the
way when the turn is priced: :class:`ModelRequestWatch`.

The seam is the meter the turn loop already calls around each request (``before``, then
``after`` or ``failed``, :mod:`.metering`); the watch is that meter, wrapping the real one when
the provider declares a price. The audit line (and so its OpenTelemetry span, see
:mod:`proctor.runtime.telemetry`) carries what a request was, never what it said: the provider
and model named in the configuration, the tokens the provider reported, the outcome and the
error code, the time it was sent.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from proctor.contracts.values import dataclass
from proctor.runtime.engine.metering import ModelMeter, reported_tokens
from proctor.runtime.records.retention import MODEL_ANSWER_EVENT

if TYPE_CHECKING:
    from proctor.runtime.engine.host import StepRunner

__all__ = ["ModelRequestWatch"]


@dataclass
class _Sent:
    inner: Any
    started_at: str
    number: int


class ModelRequestWatch:
    """A turn's meter that audits each request (see the module docstring)."""

    def __init__(
        self,
        run: StepRunner,
        step_id: str,
        step_index: int | None,
        agent: Any,
        inner: ModelMeter | None,
    ) -> None:
        config = getattr(agent, "config", None)
        self._run = run
        self._step = step_id
        self._index = step_index
        self._provider = str(getattr(config, "provider", "") or getattr(config, "dialect", ""))
        self._model = str(getattr(config, "model", "") or "")
        self._dialect = str(getattr(config, "dialect", "") or "")
        self.inner = inner
        self._count = 0

    @property
    def spent(self) -> int:
        """What the turn's priced requests cost (0 unpriced)."""
        return 0 if self.inner is None else self.inner.spent

    def before(self, body: dict[str, Any]) -> _Sent:
        """Reserve the request's worst case (priced turns; raises as :class:`ModelMeter`)."""
        held = None if self.inner is None else self.inner.before(body)
        self._count += 1
        return _Sent(held, _now(self._run), self._count)

    def after(self, sent: _Sent, document: Any) -> None:
        """The provider answered: settle it and audit it."""
        if self.inner is not None and sent.inner is not None:
            self.inner.after(sent.inner, document)
        tokens_in, tokens_out = reported_tokens(document)
        self._emit(sent, "completed", None, tokens_in, tokens_out)
        if self._run.record.data.get("retain"):  # kept for a replay, scrubbed
            kept, _ = self._run.sanitizer.value(document)
            self._run.s.store.append_event(
                self._run.run_id,
                MODEL_ANSWER_EVENT,
                {
                    "step": self._step,
                    "request": sent.number,
                    "dialect": self._dialect,
                    "model": self._model or None,
                    "document": kept,
                },
            )

    def failed(self, sent: _Sent, error: BaseException) -> None:
        """The request failed: settle it and audit it with its error code."""
        if self.inner is not None and sent.inner is not None:
            self.inner.failed(sent.inner, error)
        self._emit(sent, "failed", str(getattr(error, "code", type(error).__name__)), None, None)

    def _emit(
        self,
        sent: _Sent,
        outcome: str,
        code: str | None,
        tokens_in: int | None,
        tokens_out: int | None,
    ) -> None:
        self._run.s.audit.emit(
            "model_request",
            run_id=self._run.run_id,
            step_index=self._index,
            step=self._step,
            request=sent.number,
            provider=self._provider or None,
            model=self._model or None,
            outcome=outcome,
            code=code,
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            started_at=sent.started_at,
        )


def _now(run: StepRunner) -> str:
    clock = getattr(run.s, "clock", None)
    moment = clock() if callable(clock) else None
    if moment is None:
        from datetime import UTC, datetime

        moment = datetime.fromtimestamp(time.time(), UTC)
    return str(moment.isoformat(timespec="microseconds"))

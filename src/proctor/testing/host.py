"""The host stand-in: drives a test's run as an attached host would, from ``host:``.

It uses only the session's public surface: ``Session.run``, then, while the run is paused,
one ``Session.resume`` per round with a ``proctor.resume.v1`` document built from the
envelope's ``answers_template`` (every entry bound to the digest the run asked with), and
``Session.turn_call`` for each call of a worked turn. A round answers every request the host
has an entry for:

- an agent turn (the answers lane): a worked turn (``host.turns``) makes its calls one by
  one, then ends with its ``output`` or ``failure``; otherwise ``host.answers`` gives the
  turn's output;
- an approval (the person's lane): ``host.approvals`` (``true``/``false``); a retry question
  reads the same entry as ``{retry: bool}``; questions read ``host.answers`` as
  ``{QID: {option|text}}``;
- when a round has nothing left to answer and ``host.close`` is set, the run is closed.

A turn call that waits on a person's approval (``approval_pending``) ends the round; once
the approval is decided the same call (same ``call_id``) is made again. Each entry is used
once; what no request took is reported as unused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proctor.contracts.envelope import RunEnvelope
from proctor.contracts.testfile import Host
from proctor.contracts.values import dataclass, field
from proctor.core.authority import Authority
from proctor.errors import ProctorError
from proctor.runtime.engine.session import Session
from proctor.testing.oracle import Failure, check_call

__all__ = ["MAX_ROUNDS", "HostStandIn"]

MAX_ROUNDS = 100
"""Resumes a test may take before it is stopped as looping."""


@dataclass
class HostStandIn:
    """Works one run from a test's ``host:`` section.

    Attributes:
        used: the host entries a request took (``answers.draft``, ``approvals.post`` ...).
        call_failures: worked calls that broke their per-call ``expect``.
        turn_calls: every worked call's outcome, by turn address, in order.
    """

    host: Host
    used: set[str] = field(default_factory=set)
    call_failures: list[Failure] = field(default_factory=list)
    turn_calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _progress: dict[str, int] = field(default_factory=dict)

    def drive(
        self,
        session: Session,
        ref: str,
        *,
        inputs: dict[str, Any],
        authority: Authority | None,
        cwd: Path,
    ) -> RunEnvelope:
        """Run ``ref`` and answer it until it seals or waits on something the host has no
        entry for.

        Raises:
            ProctorError: the run could not start, or a resume was refused (the test
                errs: its host section does not fit the run).
        """
        # host.act: the act the host states for the run, which its steps read as $run.act
        env = session.run(ref, inputs=inputs, authority=authority, cwd=cwd, act=self.host.act)
        for _ in range(MAX_ROUNDS):
            run_id = env.run_id
            if env.status in ("sealed", "needs_credential") or run_id is None:
                return env
            doc, waiting = self._round(session, env)
            if waiting:
                env = session.envelope(run_id)
                continue
            if not doc:
                if self.host.close is None or "close" in self.used:
                    return env
                self.used.add("close")
                doc = {"close": {"outcome": self.host.close}}
            env = session.resume(run_id, {"schema": "proctor.resume.v1", **doc})
        raise ProctorError(
            f"the run was still paused after {MAX_ROUNDS} rounds of host answers",
            code="test_host_looping",
        )

    def _round(self, session: Session, env: RunEnvelope) -> tuple[dict[str, Any], bool]:
        """The resume document of one round, and whether a worked turn's call now waits
        on an approval (the envelope changed; read it again)."""
        assert env.run_id is not None
        template = env.answers_template or {}
        requests = {str(r.get("address")): r for r in env.requests or []}
        answers: dict[str, Any] = {}
        approvals: dict[str, Any] = {}
        for address, entry in (template.get("answers") or {}).items():
            digest = entry["request_digest"]
            turn = self.host.turns.get(address)
            if turn is not None and f"turns.{address}" not in self.used:
                if not self._work(session, env.run_id, address):
                    return {}, True
                self.used.add(f"turns.{address}")
                end = (
                    {"failure": {"reason": turn.failure}}
                    if turn.failure
                    else {"value": turn.output}
                )
                answers[address] = {"request_digest": digest, **end}
            elif address in self.host.answers and f"answers.{address}" not in self.used:
                self.used.add(f"answers.{address}")
                answers[address] = {"request_digest": digest, "value": self.host.answers[address]}
        for address, entry in (template.get("approvals") or {}).items():
            digest = entry["request_digest"]
            kind = requests.get(address, {}).get("kind")
            if kind == "question":
                if address in self.host.answers and f"answers.{address}" not in self.used:
                    self.used.add(f"answers.{address}")
                    value = self.host.answers[address]
                    approvals[address] = {"request_digest": digest, "value": value}
            elif address in self.host.approvals and f"approvals.{address}" not in self.used:
                self.used.add(f"approvals.{address}")
                decision = self.host.approvals[address]
                if kind == "retry":
                    approvals[address] = {"request_digest": digest, "value": {"retry": decision}}
                else:
                    approvals[address] = {"request_digest": digest, "approved": decision}
        doc: dict[str, Any] = {}
        if answers:
            doc["answers"] = answers
        if approvals:
            doc["approvals"] = approvals
        return doc, False

    def _work(self, session: Session, run_id: str, address: str) -> bool:
        """Make the turn's remaining calls; False when one now waits on an approval."""
        turn = self.host.turns[address]
        done = self.turn_calls.setdefault(address, [])
        index = self._progress.get(address, 0)
        while index < len(turn.calls):
            call = turn.calls[index]
            call_id = call.call_id or str(index + 1)
            outcome = session.turn_call(
                run_id, address, call.tool, call.arguments, call_id, reason=call.reason
            )
            shown = {"status": outcome.status, "result": outcome.result, "error": outcome.error}
            if (
                outcome.status == "refused"
                and (outcome.error or {}).get("code") == "approval_pending"
            ):
                return False
            done.append(shown)
            self.call_failures.extend(check_call(address, index, call.expect, shown))
            index += 1
            self._progress[address] = index
        return True

    def unused(self) -> list[str]:
        """The host entries no request took."""
        names = [f"answers.{a}" for a in self.host.answers]
        names += [f"turns.{a}" for a in self.host.turns]
        names += [f"approvals.{a}" for a in self.host.approvals]
        if self.host.close is not None:
            names.append("close")
        return [
            f"{n} (its calls were made; the turn never ended)"
            if n.startswith("turns.") and n[6:] in self._progress
            else n
            for n in names
            if n not in self.used
        ]

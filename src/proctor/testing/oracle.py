"""The oracle: a test's ``expect`` checked against what its run really did.

Everything is read back from the run's own records after the run (the envelope, the run
store's step records, the audit log, the workspace's files, the receipt tree verified under
the test key), never from what the test fed in. Each mismatch is a :class:`Failure` naming a
JSON pointer where one applies, with what was expected and what was found.

Beyond ``expect``, every test also fails when:

- its run sealed a receipt tree that does not verify under the test key;
- a host answer, approval, worked turn or ``close`` was never asked for (``unused``): an
  answer no request took proves nothing;
- an HTTP exchange was never requested, or a request matched none (``http``);
- a scripted model response was never asked for (``model``);
- a worked turn's call returned something its ``expect`` does not allow (``call``).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

from proctor.contracts.testfile import CallExpect, Expect, FileExpect, ReceiptExpect, StepExpect
from proctor.contracts.values import dataclass, field

__all__ = [
    "MISSING",
    "Failure",
    "Mismatch",
    "Observed",
    "check",
    "check_call",
    "compare",
    "pointer_join",
    "resolve_pointer",
]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""Stands for a value that is not there (a member an object lacks)."""


@dataclass(frozen=True)
class Mismatch:
    """One difference between an expected and an actual value, at ``pointer``."""

    pointer: str
    expected: Any
    actual: Any
    why: str  # "differs", "missing", "unexpected", "length", "type"


@dataclass(frozen=True)
class Failure:
    """Why a test failed, in one check.

    Attributes:
        check: which check (``status``, ``output``, ``steps``, ``unused`` ...).
        message: a sentence saying what was wrong.
        pointer: where, as a JSON pointer into what the check reads (or ``None``).
        expected / actual: the two sides, :data:`MISSING` when a side has no value.
    """

    check: str
    message: str
    pointer: str | None = None
    expected: Any = MISSING
    actual: Any = MISSING

    def to_json(self) -> dict[str, Any]:
        """The failure as JSON; a side with no value is left out."""
        out: dict[str, Any] = {"check": self.check, "message": self.message}
        if self.pointer is not None:
            out["pointer"] = self.pointer
        if self.expected is not MISSING:
            out["expected"] = self.expected
        if self.actual is not MISSING:
            out["actual"] = self.actual
        return out


def pointer_join(pointer: str, key: str | int) -> str:
    """``pointer`` extended by one member or index (RFC 6901 escaping)."""
    return pointer + "/" + str(key).replace("~", "~0").replace("/", "~1")


def resolve_pointer(document: Any, pointer: str) -> Any:
    """The value at ``pointer``, or :data:`MISSING` when there is none."""
    if pointer == "":
        return document
    current = document
    for raw in pointer.split("/")[1:]:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(current, dict):
            if key not in current:
                return MISSING
            current = current[key]
        elif isinstance(current, list):
            if not key.isdigit() or (len(key) > 1 and key[0] == "0") or int(key) >= len(current):
                return MISSING
            current = current[int(key)]
        else:
            return MISSING
    return current


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def compare(expected: Any, actual: Any, *, subset: bool, pointer: str = "") -> list[Mismatch]:
    """Every difference between ``expected`` and ``actual``.

    ``subset``: objects may carry members the expectation does not name; arrays keep their
    length and order either way (an empty array expects no items); an explicit ``null``
    expects the member to exist with that value. Without ``subset``, the values are equal
    (types included: ``true`` is not ``1``).
    """
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [Mismatch(pointer, expected, actual, "type")]
        out: list[Mismatch] = []
        for key, value in expected.items():
            here = pointer_join(pointer, key)
            if key not in actual:
                out.append(Mismatch(here, value, MISSING, "missing"))
            else:
                out.extend(compare(value, actual[key], subset=subset, pointer=here))
        if not subset:
            for key in actual:
                if key not in expected:
                    out.append(
                        Mismatch(pointer_join(pointer, key), MISSING, actual[key], "unexpected")
                    )
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return [Mismatch(pointer, expected, actual, "type")]
        if len(expected) != len(actual):
            return [Mismatch(pointer, expected, actual, "length")]
        out = []
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            out.extend(compare(want, got, subset=subset, pointer=pointer_join(pointer, index)))
        return out
    if _same_scalar(expected, actual):
        return []
    return [Mismatch(pointer, expected, actual, "differs")]


def _describe(m: Mismatch) -> str:
    where = m.pointer or "(the whole value)"
    if m.why == "missing":
        return f"{where} is missing"
    if m.why == "unexpected":
        return f"{where} is not expected"
    if m.why == "length":
        count = len(m.actual) if isinstance(m.actual, list) else 0
        return f"{where} has {count} items, expected {len(m.expected)}"
    return f"{where} differs"


def _mismatches(check: str, prefix: str, found: list[Mismatch]) -> list[Failure]:
    return [
        Failure(check, f"{prefix}{_describe(m)}", m.pointer, m.expected, m.actual) for m in found
    ]


@dataclass
class Observed:
    """What a test's run left behind, read back after it ended.

    Attributes:
        envelope: the final ``proctor.run.v1`` envelope.
        steps: the run store's settled steps by id.
        audit: the audit log's lines, in order.
        root: the test's workspace root.
        receipt: ``(verified, reason)`` of the sealed receipt tree, ``None`` when none sealed.
        receipt_body: the sealed root receipt's body, ``None`` when none sealed.
        http_counts: requests each declared exchange answered, in declaration order.
        http_declared: each exchange as ``METHOD URL``, in declaration order.
        unmatched: HTTP requests no exchange matched.
        unused_host: host entries no request took (``approvals.post``, ``close`` ...).
        unused_model: scripted model responses never asked for.
        call_failures: failures of worked turns' per-call expectations.
    """

    envelope: dict[str, Any]
    steps: dict[str, dict[str, Any]]
    audit: list[dict[str, Any]]
    root: Path
    receipt: tuple[bool, str] | None = None
    receipt_body: dict[str, Any] | None = None
    http_counts: list[int] = field(default_factory=list)
    http_declared: list[str] = field(default_factory=list)
    unmatched: list[dict[str, Any]] = field(default_factory=list)
    unused_host: list[str] = field(default_factory=list)
    unused_model: int = 0
    call_failures: list[Failure] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)
    """The run tree's calls (:func:`proctor.testing.trace.call_trace`), for a replay's
    comparison with the run it was recorded from."""


def check(expect: Expect, seen: Observed) -> list[Failure]:
    """Every failure of ``expect`` against ``seen``, then the checks every test runs."""
    env = seen.envelope
    out: list[Failure] = []
    if env.get("status") != expect.status:
        out.append(
            Failure(
                "status",
                f"the run is {env.get('status')}{_why(env)}",
                "/status",
                expect.status,
                env.get("status"),
            )
        )
    if expect.outcome is not None and env.get("outcome") != expect.outcome:
        out.append(
            Failure(
                "outcome",
                f"the run's outcome is {env.get('outcome')}{_why(env)}",
                "/outcome",
                expect.outcome,
                env.get("outcome"),
            )
        )
    result = env.get("result")
    if expect.output is not None:
        found = compare(expect.output.value, result, subset=expect.output.mode == "subset")
        out.extend(_mismatches("output", "output ", found))
    for pointer in expect.absent:
        value = resolve_pointer(result, pointer)
        if value is not MISSING:
            out.append(
                Failure("absent", f"output {pointer} must be absent", pointer, MISSING, value)
            )
    for step_id, want in expect.steps.items():
        out.extend(_check_step(step_id, want, seen.steps.get(step_id)))
    for step_id, want_output in expect.step_outputs.items():
        record = seen.steps.get(step_id)
        if record is None:
            pointer = pointer_join("/step_outputs", step_id)
            out.append(Failure("step_outputs", f"step {step_id} never ran", pointer))
            continue
        found = compare(
            want_output.value,
            record.get("output"),
            subset=want_output.mode == "subset",
            pointer=pointer_join("/step_outputs", step_id),
        )
        out.extend(_mismatches("step_outputs", f"step {step_id} output ", found))
    if expect.requests is not None:
        found = compare(expect.requests, env.get("requests") or [], subset=True)
        out.extend(_mismatches("requests", "requests ", found))
    if expect.http_request_counts is not None and expect.http_request_counts != seen.http_counts:
        out.append(
            Failure(
                "http_request_counts",
                f"the exchanges were requested {seen.http_counts} times",
                None,
                expect.http_request_counts,
                seen.http_counts,
            )
        )
    for rel, want_file in expect.files.items():
        out.extend(_check_file(seen.root, rel, want_file))
    for entry in expect.audit:
        out.extend(_check_audit(entry, seen.audit))
    if expect.receipt is not None and seen.receipt is None:
        out.append(Failure("receipt", "the run sealed no receipt", None, "verified", None))
    elif isinstance(expect.receipt, ReceiptExpect):
        out.extend(_check_receipt(expect.receipt, seen.receipt_body or {}))
    out.extend(_always(seen))
    return out


def _check_receipt(want: ReceiptExpect, body: dict[str, Any]) -> list[Failure]:
    """The root receipt against ``expect.receipt``'s fields (its verification is always
    checked); ``runx.receipt.v1`` names this runtime's receipt, as the reference's tests do."""
    out = []
    if want.schema_ is not None and body.get("schema") != "proctor.receipt.v1":
        out.append(
            Failure(
                "receipt",
                f"the receipt's schema is {body.get('schema')}",
                "/receipt/schema",
                want.schema_,
                body.get("schema"),
            )
        )
    count = len(body.get("children") or [])
    if want.child_receipt_count is not None and count != want.child_receipt_count:
        out.append(
            Failure(
                "receipt",
                f"the receipt commits {count} children",
                "/receipt/child_receipt_count",
                want.child_receipt_count,
                count,
            )
        )
    if want.outcome is not None and body.get("outcome") != want.outcome:
        out.append(
            Failure(
                "receipt",
                f"the receipt's outcome is {body.get('outcome')}",
                "/receipt/outcome",
                want.outcome,
                body.get("outcome"),
            )
        )
    return out


def _why(env: dict[str, Any]) -> str:
    refusal = env.get("refusal") or {}
    if refusal.get("code"):
        return f" ({refusal['code']}: {refusal.get('message')})"
    waits = [f"{r.get('kind')} at {r.get('address')}" for r in env.get("requests") or []]
    return f", waiting on {', '.join(waits)}" if waits else ""


def _check_step(step_id: str, want: Any, record: dict[str, Any] | None) -> list[Failure]:
    expect = want if isinstance(want, StepExpect) else StepExpect(outcome=want)
    outcome = "not_run" if record is None else str(record.get("outcome"))
    code = ((record or {}).get("refusal") or {}).get("code")
    out = []
    pointer = pointer_join("/steps", step_id)
    if expect.outcome is not None and outcome != expect.outcome:
        out.append(
            Failure(
                "steps",
                f"step {step_id} is {outcome}",
                pointer_join(pointer, "outcome"),
                expect.outcome,
                outcome,
            )
        )
    if expect.code is not None and code != expect.code:
        out.append(
            Failure(
                "steps",
                f"step {step_id} has code {code}",
                pointer_join(pointer, "code"),
                expect.code,
                code,
            )
        )
    return out


def _check_file(root: Path, rel: str, want: FileExpect) -> list[Failure]:
    pointer = pointer_join("/files", rel)
    path = root / rel
    try:
        info = os.lstat(path)
    except OSError:
        info = None
    if info is None or not stat.S_ISREG(info.st_mode):
        if not want.exists:
            return []
        return [Failure("files", f"file {rel} does not exist", pointer, "a file", None)]
    if not want.exists:
        return [Failure("files", f"file {rel} exists", pointer, None, "a file")]
    data = path.read_bytes()
    out = []
    if want.content is not None:
        text = data.decode("utf-8", errors="replace")
        if text != want.content:
            out.append(
                Failure("files", f"file {rel} has other content", pointer, want.content, text)
            )
    if want.digest is not None:
        actual = "sha256:" + hashlib.sha256(data).hexdigest()
        if actual != want.digest:
            out.append(
                Failure("files", f"file {rel} has another digest", pointer, want.digest, actual)
            )
    return out


def _check_audit(entry: str | dict[str, Any], lines: list[dict[str, Any]]) -> list[Failure]:
    want = {"event": entry} if isinstance(entry, str) else entry
    for line in lines:
        if not compare(want, line, subset=True):
            return []
    events = sorted({str(line.get("event")) for line in lines})
    return [Failure("audit", f"no audit event matches {want}", None, want, {"events": events})]


def check_call(
    address: str, index: int, want: CallExpect | None, outcome: dict[str, Any]
) -> list[Failure]:
    """A worked turn's call against its per-call ``expect``."""
    if want is None:
        return []
    pointer = f"/host/turns/{address}/calls/{index}"
    out = []
    if want.status is not None and outcome.get("status") != want.status:
        out.append(
            Failure(
                "call",
                f"turn {address} call {index + 1} was {outcome.get('status')}"
                f" ({(outcome.get('error') or {}).get('code')})",
                pointer + "/status",
                want.status,
                outcome.get("status"),
            )
        )
    code = (outcome.get("error") or {}).get("code")
    if want.code is not None and code != want.code:
        out.append(
            Failure(
                "call",
                f"turn {address} call {index + 1} has code {code}",
                pointer + "/code",
                want.code,
                code,
            )
        )
    if want.result is not None:
        found = compare(
            want.result.value,
            outcome.get("result"),
            subset=want.result.mode == "subset",
            pointer=pointer + "/result",
        )
        out.extend(_mismatches("call", f"turn {address} call {index + 1} result ", found))
    if want.outcome is not None:
        found = compare(
            want.outcome.value,
            {"outcome": outcome},
            subset=want.outcome.mode == "subset",
            pointer=pointer + "/expect",
        )
        out.extend(_mismatches("call", f"turn {address} call {index + 1} ", found))
    return out


def _always(seen: Observed) -> list[Failure]:
    out: list[Failure] = list(seen.call_failures)
    if seen.receipt is not None and not seen.receipt[0]:
        out.append(
            Failure(
                "receipt",
                f"the receipt tree does not verify ({seen.receipt[1]})",
                None,
                "verified",
                seen.receipt[1],
            )
        )
    for name in seen.unused_host:
        out.append(
            Failure("unused", f"host {name} was not used: no request of the run took it", None)
        )
    for index, count in enumerate(seen.http_counts):
        if count == 0:
            label = seen.http_declared[index] if index < len(seen.http_declared) else ""
            out.append(
                Failure(
                    "http",
                    f"providers.http[{index}] ({label}) was never requested",
                    f"/providers/http/{index}",
                )
            )
    for request in seen.unmatched:
        out.append(
            Failure(
                "http",
                f"{request['method']} {request['url']} ({request['body']} "
                "body) matched no providers.http exchange; it was refused",
                None,
                MISSING,
                request,
            )
        )
    if seen.unused_model:
        out.append(
            Failure(
                "model",
                f"{seen.unused_model} scripted model responses were never asked for",
                "/providers/model/responses",
            )
        )
    return out

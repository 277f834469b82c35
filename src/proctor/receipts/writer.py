"""Build, sign and store receipts as a run seals its calls, steps and itself.

Usage by the run driver (children first; a parent commits the refs its children returned)::

    writer = ReceiptWriter(store, signer)               # clock defaults to UTC now
    c1 = writer.call(Subject("hello", pkg, "main", "load", "fs.read"),
                     outcome="completed", started_at=t0, ended_at=t1,
                     inputs_digest=digest(args), outputs_digest=digest(result))
    s1 = writer.step(Subject("hello", pkg, "main", "load"), outcome="completed",
                     started_at=t0, children=[c1])
    root = writer.run(Subject("hello", pkg, "main"), outcome="completed",
                      started_at=t0, children=[s1], authority_digest=..., policy_digest=...)
    root.receipt_id                                     # goes into proctor.run.v1

Step and run receipts are written to the store before the method returns. Call receipts are
held in memory and written, in one batch with a single folder fsync, by the next ``step`` or
``run`` (or :meth:`ReceiptWriter.flush`), so the per-call cost is building and hashing the body
(tens of microseconds), not a file creation and fsync (about a millisecond on this disk). A
ref therefore always resolves once the receipt committing it is written, and the run receipt
is written (with everything below it) before ``run`` returns. ``ended_at`` defaults to the
injected clock; ``started_at`` is the caller's.

Sealing a whole run at once (``batch=n``) holds step receipts too and writes every ``n``
receipts, so a run's tree costs a few synced batches, not one per step; ``run`` (and
:meth:`ReceiptWriter.flush`) still write everything held before they return.

By default call receipts are **amortized**: written unsigned and authenticated by the signed
step (or run) that commits their body digest; ``sign_calls=True`` signs them too. Step and run
receipts are always signed.

A parent with more than :data:`~proctor.core.budget.SEGMENT_FANOUT` children (a run of many
steps, a step of many calls) commits them through :class:`ChildList`, which writes a
``segment`` receipt for each ``SEGMENT_FANOUT`` of them as they come (and segments of segments),
so no receipt grows past that many commitments and the writer holds at most that many refs per
level; a parent of fewer commits its children directly, as before.

The writer refuses, before writing anything, to build a tree no verifier would accept: a ref
committed twice, a tree past :data:`~proctor.core.budget.MAX_TREE_RECEIPTS` receipts or deeper
than :data:`~proctor.core.budget.MAX_TREE_DEPTH` levels. The run's budget
(:class:`~proctor.core.budget.ReceiptBudget`) is what keeps a run from ever reaching that.
Same inputs, same key and the same clock give byte-identical receipt files.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from binascii import b2a_base64
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from proctor.core.budget import MAX_TREE_DEPTH, MAX_TREE_RECEIPTS
from proctor.errors import ReceiptInvalid, UsageError
from proctor.receipts.body_bytes import plain_text
from proctor.receipts.canonical import DIGEST_PREFIX, canonical, canonical_plain, is_digest
from proctor.receipts.child_list import ChildList, Ref
from proctor.receipts.model import (
    OUTCOMES,
    RECEIPT_SCHEMA,
    SEAL_REASONS,
    Subject,
    Verdict,
    check_body,
    encode_envelope,
    format_time,
)
from proctor.receipts.scan import recognized
from proctor.receipts.signing import Signer, b64

__all__ = ["ChildList", "Clock", "ReceiptSink", "ReceiptWriter", "Ref", "seal", "utc_now"]

Clock = Callable[[], datetime]
_WRITERS = itertools.count(1)  # each writer numbers its refs from its own base
_IS_DIGEST = re.compile(r"sha256:[0-9a-f]{64}").fullmatch  # is_digest, for an exact str
# a stored time as ``datetime.isoformat`` writes a UTC reading with microseconds: its receipt
# text (:func:`format_time`) is its first 26 characters and ``Z``
_UTC_TEXT = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}\+00:00"
).fullmatch
_sha256 = hashlib.sha256
_NO_REFS = range(0)  # the refs of this writer a receipt without children may name
_new_ref = tuple.__new__  # a Ref from its seven fields in one step (Ref's own __new__ binds
# its arguments in Python first)


def utc_now() -> datetime:
    """The current time in UTC (the default clock)."""
    return datetime.now(UTC)


def seal(body: dict[str, Any], signer: Signer, *, signed: bool = True) -> tuple[str, bytes]:
    """The receipt id and file bytes of a body, signed by ``signer`` (or left unsigned).

    Low level: it checks nothing about the tree (tests and benchmarks use it to build trees
    the writer would refuse). The run driver uses :class:`ReceiptWriter`.

    Raises:
        UsageError: the body is not representable in canonical JSON.
    """
    body_bytes = canonical(body)
    receipt_id = DIGEST_PREFIX + hashlib.sha256(body_bytes).hexdigest()
    signature = b64(signer.sign(body_bytes)) if signed else None
    return receipt_id, encode_envelope(body_bytes, signer.key_id, signature)


class ReceiptSink(Protocol):
    """Where receipts go: :class:`proctor.runtime.records.receipts.ReceiptStore` implements it."""

    def put_many(self, items: Sequence[tuple[str, bytes, str, str]]) -> None:
        """Store ``(receipt_id, file bytes, kind, outcome)`` items; never rewrite an id."""


_KEY_PARTS: dict[str, tuple[bool, bytes]] = {}
"""By key id: whether it is a digest, and the envelope's bytes naming it (see ReceiptWriter)."""


class ReceiptWriter:
    """Writes the receipts of one run (one writer per run).

    ``batch``: hold step receipts as well as calls' and write them every ``batch`` receipts
    (``run`` and :meth:`flush` write what is held); by default each step writes at once.

    Raises (from every method):
        UsageError: a malformed field (an unknown outcome or seal reason, a digest that is not
            ``sha256:<hex>``, a naive datetime, ended before started).
        ReceiptInvalid: a child ref committed twice, or a tree past the verifier's bounds.
        StoreError / ReceiptInvalid from the store: it could not write, or is not ours.
    """

    def __init__(
        self,
        store: ReceiptSink,
        signer: Signer,
        *,
        clock: Clock = utc_now,
        sign_calls: bool = False,
        batch: int | None = None,
    ) -> None:
        self._store = store
        self._signer = signer
        self._clock = clock
        self._sign_calls = sign_calls
        self._batch = batch
        self._committed: set[str] = set()  # refs made elsewhere (serial -1) once committed
        self._serials = bytearray()  # one per receipt written here: 1 once committed
        self._base = next(_WRITERS) << 40  # a ref of another writer falls outside this range
        self._pending: list[tuple[str, bytes, str, str]] = []
        self._unsigned_at: list[int] = []  # held receipts whose bodies await their signature
        self._times: dict[datetime, str] = {}
        self._package: str | None = None  # the last subject package digest found a digest
        key_id = self._key_id = signer.key_id
        # a key id that is a digest lets plain bodies be written directly (see plain_body);
        # made once per key id (a writer is made for every seal)
        parts = _KEY_PARTS.get(key_id)
        if parts is None:
            if len(_KEY_PARTS) >= 16:
                _KEY_PARTS.clear()
            parts = _KEY_PARTS[key_id] = (
                is_digest(key_id),
                b',"key_id":"' + key_id.encode("utf-8") + b'","signature":',
            )
        self._plain_key, self._key_bytes = parts

    @property
    def key_id(self) -> str:
        """The key id every receipt of this writer names."""
        return self._signer.key_id

    def call(self, subject: Subject, **fields: Any) -> Ref:
        """Seal one call's receipt (see :meth:`write` for the fields)."""
        return self.write("call", subject, **fields)

    def step(self, subject: Subject, **fields: Any) -> Ref:
        """Seal one step's receipt, committing its calls' refs as ``children``."""
        return self.write("step", subject, **fields)

    def run(self, subject: Subject, **fields: Any) -> Ref:
        """Seal the run's receipt, committing its steps' refs as ``children``."""
        return self.write("run", subject, **fields)

    def segment(
        self, subject: Subject, children: Sequence[Ref], *, started_at: datetime, ended_at: datetime
    ) -> Ref:
        """Seal a segment receipt committing ``children`` (see :class:`ChildList`): completed
        when every child completed, else failed (``child_failed``); unsigned unless
        ``sign_calls``."""
        done = all(c.outcome == "completed" for c in children)
        return self.write(
            "segment",
            subject,
            outcome="completed" if done else "failed",
            seal_reason=None if done else "child_failed",
            started_at=started_at,
            ended_at=ended_at,
            children=children,
        )

    def write(
        self,
        kind: str,
        subject: Subject,
        *,
        outcome: str,
        started_at: datetime,
        ended_at: datetime | None = None,
        seal_reason: str | None = None,
        inputs_digest: str | None = None,
        outputs_digest: str | None = None,
        authority_digest: str | None = None,
        policy_digest: str | None = None,
        verdicts: Iterable[Verdict] = (),
        children: Sequence[Ref] = (),
        sandbox: dict[str, Any] | None = None,
        audit_head: Mapping[str, Any] | None = None,
        spend_micro_usd: int | None = None,
        context_digests: Sequence[str] | None = None,
        reused_from: str | None = None,
        package: Mapping[str, Any] | None = None,
        identity: str | None = None,
    ) -> Ref:
        """Build, sign (unless an amortized call), store and return one receipt's ref.

        ``sandbox`` (a process call's ``{used, mode, network}``) is added to call receipts only.
        ``audit_head`` (run receipts only) is ``{lines, last_digest}``: the audit log's head
        this receipt anchors. ``spend_micro_usd`` (step and run receipts) is what a priced
        step's call, or the run's tree, actually spent. ``context_digests`` (step receipts)
        are the SKILL.md digests an agent step was shown as context; ``reused_from`` (run
        receipts) the receipt of the run a reused child took its result from; ``package`` (run
        receipts) the registry or core name its package verified as; ``identity`` (run
        receipts) the run's package identity (``core:``, ``registry:``, ``local:``).
        """
        if outcome not in OUTCOMES:
            raise UsageError(f"unknown receipt outcome {outcome!r}", code="receipt_field_invalid")
        if seal_reason is not None and (outcome == "completed" or seal_reason not in SEAL_REASONS):
            if seal_reason not in SEAL_REASONS:
                raise UsageError(
                    f"unknown seal reason {seal_reason!r}", code="receipt_field_invalid"
                )
            raise UsageError("a completed receipt has no seal reason", code="receipt_field_invalid")
        inp, out, pkg = inputs_digest, outputs_digest, subject.package_digest
        if (  # is_digest of each, the common two inline and the package's remembered
            (inp is not None and (type(inp) is not str or not _IS_DIGEST(inp)))
            or (out is not None and (type(out) is not str or not _IS_DIGEST(out)))
            or (authority_digest is not None and not is_digest(authority_digest))
            or (policy_digest is not None and not is_digest(policy_digest))
            or (pkg is not None and pkg != self._package and not self._known_package(pkg))
        ):
            for name, value in (
                ("inputs_digest", inputs_digest),
                ("outputs_digest", outputs_digest),
                ("authority_digest", authority_digest),
                ("policy_digest", policy_digest),
                ("package_digest", pkg),
            ):
                if value is not None and not is_digest(value):
                    raise UsageError(f"{name} must be sha256:<hex>", code="receipt_field_invalid")
        times = self._times
        started = times.get(started_at) or self._time(started_at)
        if ended_at is None:
            ended_at = self._clock()
        ended = times.get(ended_at) or self._time(ended_at)
        if ended < started:
            raise UsageError("a receipt cannot end before it starts", code="receipt_field_invalid")
        size, height = self._admit_children(children) if children else (1, 0)
        unsigned = (kind == "call" or kind == "segment") and not self._sign_calls
        if verdicts:
            verdicts = tuple(verdicts)
        if (
            self._plain_key
            and sandbox is None
            and not verdicts
            and not context_digests
            and reused_from is None
            and package is None
        ):
            text = plain_text(
                kind,
                subject,
                outcome,
                seal_reason,
                started,
                ended,
                inputs_digest,
                outputs_digest,
                authority_digest,
                policy_digest,
                children,
                range(self._base, self._base + len(self._serials)) if children else _NO_REFS,
                self._key_id,
                spend_micro_usd,
                audit_head,
                identity,
            )
            if text is not None:
                body_bytes = text.encode("ascii")
                receipt_id = DIGEST_PREFIX + _sha256(body_bytes).hexdigest()
                if unsigned:
                    data = b"".join((b'{"body":', body_bytes, self._key_bytes, b"null}\n"))
                else:  # signed at the flush, with the others held (see _sign_held)
                    self._unsigned_at.append(len(self._pending))
                    data = body_bytes
                return self._stored(kind, outcome, children, size, height, receipt_id, data)
        body: dict[str, Any] = {
            "schema": RECEIPT_SCHEMA,
            "kind": kind,
            "subject": subject.to_json(),
            "inputs_digest": inputs_digest,
            "outputs_digest": outputs_digest,
            "outcome": outcome,
            "seal_reason": seal_reason,
            "authority_digest": authority_digest,
            "policy_digest": policy_digest,
            "verdicts": [v.to_json() for v in verdicts],
            "started_at": started,
            "ended_at": ended,
            "children": [
                {"receipt_id": c.receipt_id, "body_digest": c.body_digest} for c in children
            ],
            "key_id": self._signer.key_id,
            "audit_head": None if audit_head is None else dict(audit_head),
        }
        if sandbox is not None:
            body["sandbox"] = sandbox
        if spend_micro_usd is not None:  # a step's priced call, or a run tree's total
            body["spend_micro_usd"] = spend_micro_usd
        if context_digests:  # the SKILL.md digests an agent step was shown as context
            body["context_digests"] = list(context_digests)
        if reused_from is not None:  # a reused child run: the run receipt it took its result from
            body["reused_from"] = reused_from
        if package is not None:  # the registry or core name the run's package verified as
            body["package"] = dict(package)
        if identity is not None:  # the package identity its namespaces were keyed by
            body["identity"] = identity
        receipt_id, data = self._seal(body, signed=not unsigned)
        return self._stored(kind, outcome, children, size, height, receipt_id, data)

    def _stored(
        self,
        kind: str,
        outcome: str,
        children: Sequence[Ref],
        size: int,
        height: int,
        receipt_id: str,
        data: bytes,
    ) -> Ref:
        serials, base = self._serials, self._base
        mine = len(serials)
        for c in children:
            at = c.serial - base
            if 0 <= at < mine:
                serials[at] = 1
            else:
                self._committed.add(c.receipt_id)
        pending = self._pending
        pending.append((receipt_id, data, kind, outcome))
        serial = base + len(serials)
        serials.append(0)
        if kind == "run" or (
            len(pending) >= self._batch if self._batch else kind != "call" and kind != "segment"
        ):
            self.flush()
        return _new_ref(Ref, (receipt_id, receipt_id, kind, outcome, size, height, serial))

    def _known_package(self, package_digest: str) -> bool:
        """Whether ``package_digest`` is a digest, remembered for the next receipts (a run's
        subjects all name the same package)."""
        if is_digest(package_digest):
            self._package = package_digest
            return True
        return False

    def moment(self, value: Any, default: datetime) -> datetime:
        """``datetime.fromisoformat(value)`` of a stored time, ``default`` when ``value`` is not
        a string or does not parse. A text of the form ``YYYY-MM-DDTHH:MM:SS.ffffff+00:00``
        (a UTC clock reading, as the run store keeps it) also gives this writer the moment's
        receipt text (:func:`format_time` of it is the text up to the fraction's end and
        ``Z``), so a receipt naming it does not format it again."""
        if not isinstance(value, str):
            return default
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return default
        # a fraction of 000000 is left to format_time: an hour 24 (which later versions read
        # as the next day's midnight) has no other
        if _UTC_TEXT(value) is not None and moment.microsecond:
            times = self._times
            if moment not in times:
                if len(times) >= 4096:
                    times.clear()
                times[moment] = value[:26] + "Z"
        return moment

    def _time(self, moment: datetime) -> str:
        """:func:`format_time` of ``moment``, remembered for the moments a seal repeats (a
        parent's span on each of its segments, a fixed clock)."""
        times = self._times
        text = times.get(moment)
        if text is None:
            if len(times) >= 4096:
                times.clear()
            text = times[moment] = format_time(moment)
        return text

    def _seal(self, body: dict[str, Any], *, signed: bool) -> tuple[str, bytes]:
        """The id and bytes of ``body``'s receipt, checked to be one every verifier accepts.

        The check has two routes with one answer: the fast recognizer of the verifier
        (:func:`~proctor.receipts.scan.recognized`, which accepts only what the strict rules
        accept) on the finished bytes, and the strict rules (:func:`check_body`) for anything
        it does not take. A body made of what :func:`check_body` admits is plain JSON (exact
        dicts with ASCII keys, lists, strings, booleans, null, safe integers), so it is
        encoded by the plain route without the walk :func:`canonical` makes first.
        """
        try:
            body_bytes = canonical_plain(body)
        except (UnicodeEncodeError, TypeError, ValueError):
            body_bytes = b""  # not plain: the strict rules below say why (or canonical does)
        if body_bytes:
            receipt_id = DIGEST_PREFIX + hashlib.sha256(body_bytes).hexdigest()
            signature = b64(self._signer.sign(body_bytes)) if signed else None
            data = encode_envelope(body_bytes, self._signer.key_id, signature)
            if recognized(data):
                return receipt_id, data
        try:
            check_body(body)
        except ReceiptInvalid as exc:
            raise UsageError(exc.message, code="receipt_field_invalid") from exc
        return seal(body, self._signer, signed=signed)

    def flush(self) -> None:
        """Write the call receipts held so far (step and run receipts write them anyway).

        Raises:
            StoreError, ReceiptInvalid: from the store; unwritten receipts stay pending.
        """
        if self._unsigned_at:
            self._sign_held()
        if self._pending:
            self._store.put_many(self._pending)
            self._pending.clear()

    def _sign_held(self) -> None:
        """Sign the held bodies waiting for it, in one loop, and make their envelopes."""
        pending, at = self._pending, self._unsigned_at
        bodies = [pending[i][1] for i in at]
        key = self._key_bytes
        for i, body, sig in zip(at, bodies, map(self._signer.sign, bodies), strict=True):
            rid, _, kind, outcome = pending[i]
            data = b"".join((b'{"body":', body, key, b'"', b2a_base64(sig, newline=False), b'"}\n'))
            pending[i] = (rid, data, kind, outcome)
        at.clear()

    def _admit_children(self, children: Sequence[Ref]) -> tuple[int, int]:
        size, height = 1, 0
        serials, base, committed = self._serials, self._base, self._committed
        mine = len(serials)
        if len(children) == 1 or len({c.receipt_id for c in children}) == len(children):
            for child in children:  # no ref twice among them: each against the committed
                at = child.serial - base
                if serials[at] if 0 <= at < mine else child.receipt_id in committed:
                    raise _committed_twice(child)
                size += child.size
                if child.height >= height:
                    height = child.height + 1
        else:
            seen: set[str] = set()
            for child in children:
                at = child.serial - base
                if (serials[at] if 0 <= at < mine else child.receipt_id in committed) or (
                    child.receipt_id in seen
                ):
                    raise _committed_twice(child)
                seen.add(child.receipt_id)
        if size > MAX_TREE_RECEIPTS:
            raise ReceiptInvalid(
                f"this receipt would head a tree of {size} receipts, past the bound of "
                f"{MAX_TREE_RECEIPTS} every verifier holds",
                code="receipt_tree_too_large",
            )
        if height > MAX_TREE_DEPTH:
            raise ReceiptInvalid(
                f"this receipt would head a tree {height} levels deep, past the bound of "
                f"{MAX_TREE_DEPTH}",
                code="receipt_tree_too_deep",
            )
        return size, height


def _committed_twice(child: Ref) -> ReceiptInvalid:
    return ReceiptInvalid(
        f"receipt {child.receipt_id} is already committed by another parent; "
        "each receipt has exactly one parent",
        code="receipt_committed_twice",
    )

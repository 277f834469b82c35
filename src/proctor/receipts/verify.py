"""Verify a receipt and the whole tree below it (pure: receipts come from a loader callback).

:func:`verify_tree` walks the tree depth-first, reading each receipt only when it reaches it.
Memory holds the current path (for each receipt on it, the list of children its body commits;
proctor writes at most :data:`~proctor.core.budget.SEGMENT_FANOUT` per receipt) plus what makes
"committed exactly once" checkable: the salted hashes of the ids seen, as a set of integers for
the first :data:`~proctor.receipts.seen.SMALL_SEEN` receipts, then as 5-byte fingerprints
(:class:`~proctor.receipts.seen.Fingerprints`), so a tree of millions of receipts is verified in
memory nearly flat in its size. A fingerprint met twice is a suspect, never a verdict: the walk
stops there and is made again tracking the suspect ids exactly (and the rest by fingerprint),
and so on until a walk meets no new suspect; its result is the one returned. A true duplicate
is thus named exactly where a walk holding every id in a set names it, and a tree that commits
one receipt many times (a diamond chain, exponential to walk) stops at its first repeat.

For every receipt, in this order, the first failure ends the walk with status ``invalid``:

1. its parent's commitment: not on the current path (``cycle``), not seen before
   (``committed_twice``: two parents, or one parent listing it twice), ``body_digest`` equal
   to ``receipt_id`` (``commitment_mismatch``), at most 160 levels below the root
   (``too_deep``), at most 16,777,216 receipts in the tree (``too_many``);
2. it can be read (``not_found`` for the root, ``child_missing`` below it);
3. the file is a well-formed, canonical ``proctor.receipt.v1`` envelope (``malformed``,
   ``not_canonical``, ``key_id_mismatch``, ``signature_missing``) and commits none of its own
   ancestors (``cycle``);
4. the digest of its canonical body is the id it was committed under (``digest_mismatch``:
   a changed byte, or a different body under that id);
5. its signature: by a trusted key and valid, or invalid (``signature_invalid``). A receipt
   signed by a key the verifier does not hold cannot be checked: the tree is then at best
   ``unverified`` (reason ``unknown_key``). An unsigned (amortized) call or segment is accepted
   below the root, where its parent's signed commitment covers its bytes; as the root it is
   ``unverified`` (reason ``unsigned``).

A tree with no invalid receipt is ``verified`` when every signature was checked, else
``unverified``, naming the first receipt that could not be checked.

Bytes that fail 3 or 4 may not be the receipt's at all: a loader that reads where something
untrusted points (the folder reader reads a pack's receipts where its index says) gives a
``reload``, a second look that finds the receipt by the digests of bodies alone; its bytes,
when it finds other ones, are checked in their place, so an index that lies costs a second
look, and a receipt is only ever accepted by its own digest (and its parent's commitment or
its signature).

Signature checks may be batched (``verify_batch``): the walk then queues each signed receipt's
check with a snapshot of its counts and runs the queue every :data:`BATCH_SIZE` checks
(:data:`SUBMIT_SIZE` with ``submit_batch``), before any other failure is reported and at the
end. A failing check reports exactly what the walk
would have reported stopping at that receipt, so batching changes the speed, not the result:
the first failing receipt in walk order is still the one named. The queue holds at most
:data:`BATCH_SIZE` bodies (or :data:`BATCH_BYTES`), which keeps memory to the current path.

With ``submit_batch`` the batches are checked *while the walk goes on* (reading and parsing
the next receipts overlaps the signature checks): at most :data:`MAX_IN_FLIGHT` batches are
out at once (the walk waits for the oldest beyond that, so memory stays bounded), a failing
batch stops the walk as soon as the walk learns of it, and before any result is returned
every batch still out is waited for, oldest first. The checks still queued when the walk ends
are not sent off: the walk checks them itself while the batches out finish (it has nothing
else left to do). Every queued check precedes in walk order
whatever the walk found after queueing it, so the first failure among the batches, else the
walk's own, is still exactly the one the one-by-one walk names.

Receipts are recognized by :func:`proctor.receipts.scan.scan_envelope` (one compiled pattern)
and only what it does not recognize goes to the strict parser, which names the error.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import itemgetter

from proctor.core.budget import MAX_TREE_DEPTH, MAX_TREE_RECEIPTS
from proctor.errors import ReceiptInvalid
from proctor.receipts.canonical import DIGEST_PREFIX
from proctor.receipts.parts import ChildPair
from proctor.receipts.scan import Scanned, scan_envelope
from proctor.receipts.seen import SMALL_SEEN, Fingerprints
from proctor.receipts.signing import PublicKey
from proctor.receipts.verify_result import VERIFY_SCHEMA, Status, VerifyResult

__all__ = [
    "BATCH_BYTES",
    "BATCH_SIZE",
    "MAX_IN_FLIGHT",
    "SUBMIT_SIZE",
    "VERIFY_SCHEMA",
    "BatchSubmitter",
    "BatchVerifier",
    "Loader",
    "SignatureCheck",
    "Status",
    "VerifyResult",
    "verify_serially",
    "verify_tree",
]


Loader = Callable[[str], "bytes | None"]

#: One signature to check: the trusted key, the signature, the signed (canonical body) bytes.
SignatureCheck = tuple[PublicKey, bytes, bytes]
#: Checks a batch; returns the index of the first check that fails, or None when all pass.
BatchVerifier = Callable[[Sequence[SignatureCheck]], "int | None"]
#: Starts checking a batch in the background; the returned callable waits for it and returns
#: the index of the first check that fails, or None (it raises what a check raised).
BatchSubmitter = Callable[[Sequence[SignatureCheck]], Callable[[], "int | None"]]

#: Signature checks queued before a batch runs, and the body bytes they may hold at most.
BATCH_SIZE = 256
#: Checks per batch a ``submit_batch`` walk hands over: smaller, so that the walk hands work
#: over often enough to keep every checker busy, and the last batches out are short.
SUBMIT_SIZE = 64
BATCH_BYTES = 4 << 20
#: Batches a ``submit_batch`` walk has out at once before it waits for the oldest.
MAX_IN_FLIGHT = 4


def verify_serially(checks: Sequence[SignatureCheck]) -> int | None:
    """Check each signature in turn; the index of the first that fails, or None."""
    for i, (key, signature, message) in enumerate(checks):
        if not key.verify(signature, message):
            return i
    return None


_FIRST = itemgetter(0)  # a child commitment's receipt id

_MESSAGES = {
    "ok": "every receipt in the tree is intact and signed by a trusted key",
    "unknown_key": "signed by a key this verifier does not hold, so the signature was not checked",
    "unsigned": "an unsigned call receipt; verify the step or run that commits it",
    "cycle": "commits one of its own ancestors (a cycle)",
    "committed_twice": "is committed more than once (two parents, or twice by one parent)",
    "commitment_mismatch": "is committed with a body_digest that differs from its receipt_id",
    "too_deep": f"lies more than {MAX_TREE_DEPTH} levels below the root",
    "too_many": f"takes the tree past {MAX_TREE_RECEIPTS} receipts",
    "not_found": "was not found",
    "child_missing": "is committed by its parent but was not found",
    "digest_mismatch": "has a body whose digest is not the id it is stored and committed under",
    "signature_invalid": "has a signature that does not verify against its key",
}


class _Walk:
    __slots__ = ("amortized", "count", "depth", "key_ids", "signed", "unknown", "unverified")

    def __init__(self) -> None:
        self.count = 0
        self.signed = 0
        self.amortized = 0
        self.unknown = 0
        self.depth = 0
        self.key_ids: dict[str, None] = {}
        self.unverified: tuple[str, str, str | None] | None = None

    def at(self, snap: _Snap) -> _Walk:
        """A walk with the counts of ``snap`` (what stopping at that receipt would report)."""
        past = _Walk()
        past.count, past.signed, past.amortized, past.unknown, past.depth, keys = snap
        past.key_ids = dict.fromkeys(list(self.key_ids)[:keys])
        return past


#: A walk's counts at one receipt, to report a queued check that fails later: count, signed,
#: amortized, unknown, depth, and how many key ids it had seen (see _Walk.at).
_Snap = tuple[int, int, int, int, int, int]
_Mark = tuple[str, "str | None", _Snap]


class _Checks:
    """Signature checks queued by the walk, each with the counts to report if it fails."""

    __slots__ = ("checks", "limit", "marks", "out", "run", "submit")

    def __init__(self, run: BatchVerifier, limit: int, submit: BatchSubmitter | None) -> None:
        self.run = run
        self.submit = submit
        self.limit = limit
        self.checks: list[SignatureCheck] = []
        self.marks: list[_Mark] = []
        # batches checking in the background, oldest first, each with its marks
        self.out: deque[tuple[Callable[[], int | None], list[_Mark]]] = deque()

    def flush(self, walk: _Walk, root_id: str | None) -> VerifyResult | None:
        """Run (or send off) the queued checks; the result for the first known to fail.

        With a submitter the batch is sent off and only the oldest batch beyond
        :data:`MAX_IN_FLIGHT` is waited for; :meth:`finish` waits for the rest.
        """
        if not self.checks:
            return None
        checks, marks = self.checks, self.marks
        self.checks, self.marks = [], []
        if self.submit is None:
            return self._failed(walk, root_id, self.run(checks), marks)
        self.out.append((self.submit(checks), marks))
        if len(self.out) > MAX_IN_FLIGHT:
            wait, marks = self.out.popleft()
            failed = self._failed(walk, root_id, wait(), marks)
            if failed is not None:
                self.out.clear()  # every batch still out comes later in walk order
            return failed
        return None

    def fresh(self) -> _Checks:
        """An empty queue checking as this one does (for a walk made again)."""
        return _Checks(self.run, self.limit, self.submit)

    def finish(self, walk: _Walk, root_id: str | None) -> VerifyResult | None:
        """The walk is over: check what is queued here, then wait for every batch out, oldest
        first; the first failure in walk order.

        The last checks are not sent off: the walk has nothing left to do, so it checks them
        while the batches out finish elsewhere, rather than wait for them idle.
        """
        checks, marks = self.checks, self.marks
        self.checks, self.marks = [], []
        last = self.run(checks) if checks else None
        failed = None
        while self.out:
            wait, out = self.out.popleft()
            found = wait()
            if failed is None:
                failed = self._failed(walk, root_id, found, out)
        # every batch out precedes the last checks in walk order
        return failed or self._failed(walk, root_id, last, marks)

    @staticmethod
    def _failed(
        walk: _Walk, root_id: str | None, failed: int | None, marks: list[_Mark]
    ) -> VerifyResult | None:
        if failed is None:
            return None
        rid, parent, snap = marks[failed]
        return _invalid(walk.at(snap), root_id, "signature_invalid", None, rid, parent)


def verify_tree(
    root_id: str | None,
    load: Loader,
    keys: Iterable[PublicKey],
    *,
    root_bytes: bytes | None = None,
    max_receipts: int = MAX_TREE_RECEIPTS,
    max_depth: int = MAX_TREE_DEPTH,
    verify_batch: BatchVerifier | None = None,
    submit_batch: BatchSubmitter | None = None,
    batch_size: int | None = None,
    small_seen: int = SMALL_SEEN,
    reload: Loader | None = None,
) -> VerifyResult:
    """Verify the receipt ``root_id`` and every receipt below it.

    ``load(receipt_id)`` returns a receipt file's bytes or ``None`` when absent. ``reload``, if
    given, is the loader's second look: asked for a receipt whose bytes from ``load`` do not
    hold up (do not parse, commit an ancestor, or are not the receipt's: their body's digest
    is not its id), it returns the receipt's bytes found another way (e.g. by the digests of
    the bodies in a folder's packs, where ``load`` read where an index said), or None; those
    bytes are then checked in their place, and the failure reported is theirs (else that of
    the bytes ``load`` gave). A loader that reads where something untrusted points gives
    one, so that a lie there costs a second look, never a receipt accepted unchecked. Pass
    ``root_bytes`` to verify a file in hand: ``root_id`` may then be ``None`` (the root's id
    is its body digest) or the id its file name claims (checked). ``verify_batch`` checks
    signatures :data:`BATCH_SIZE` at a time (e.g. on several cores); without it each signature
    is checked as its receipt is read; ``submit_batch`` (which takes precedence) checks each
    batch in the background while the walk reads on. The result is the same every way.
    ``batch_size`` is how many checks a batch holds (at most; :data:`BATCH_BYTES` also ends one;
    by default :data:`BATCH_SIZE`, or :data:`SUBMIT_SIZE` with ``submit_batch``).
    ``small_seen``: receipts held as a set of hashes before fingerprints (see the module); the
    result does not depend on it.

    Returns a :class:`VerifyResult`; tampering is a result, not an exception.

    Raises:
        whatever ``load`` raises (e.g. ``ReceiptInvalid`` for a store that is not ours),
        unless a queued signature check before it fails (that result is returned instead).
    """
    trusted = {key.key_id: key for key in keys}
    walk = _Walk()
    if root_id is None:
        if root_bytes is None:
            raise ValueError("verify_tree needs a root id or the root's bytes")
        from proctor.receipts.model import parse_envelope

        try:
            env = parse_envelope(root_bytes)
        except ReceiptInvalid as exc:
            return _invalid(walk, None, exc.code, exc.message, None, None)
        root_id = DIGEST_PREFIX + hashlib.sha256(env.body_bytes).hexdigest()

    if submit_batch is not None:
        size = SUBMIT_SIZE if batch_size is None else batch_size
        queue = _Checks(verify_serially, max(1, size), submit_batch)
    elif verify_batch is None:
        queue = _Checks(verify_serially, 1, None)
    else:
        size = BATCH_SIZE if batch_size is None else batch_size
        queue = _Checks(verify_batch, max(1, size), None)
    track: frozenset[str] = frozenset()
    while True:
        suspects: list[str] = []
        try:
            stopped = _walk(
                root_id,
                load,
                trusted,
                root_bytes,
                max_receipts,
                max_depth,
                walk,
                queue,
                track,
                suspects,
                small_seen,
                reload,
            )
        except Exception:
            # a queued signature check that fails precedes (in walk order) what the loader raised
            failed = queue.finish(walk, root_id)
            if failed is not None:
                return failed
            raise
        # a queued signature check precedes (in walk order) whatever stopped the walk
        failed = queue.finish(walk, root_id)
        if not suspects:
            break
        # a fingerprint met twice: the walk again, tracking those ids exactly (see the module)
        track |= frozenset(suspects)
        walk = _Walk()
        queue = queue.fresh()
    if failed is not None:
        return failed
    if stopped is not None:
        return stopped
    if walk.unverified is not None:
        reason, rid, parent = walk.unverified
        return _result(walk, "unverified", root_id, reason, _MESSAGES[reason], rid, parent)
    return _result(walk, "verified", root_id, "ok", _MESSAGES["ok"], None, None)


def _walk(
    root_id: str,
    load: Loader,
    trusted: dict[str, PublicKey],
    root_bytes: bytes | None,
    max_receipts: int,
    max_depth: int,
    walk: _Walk,
    queue: _Checks,
    track: frozenset[str],
    suspects: list[str],
    small_seen: int = SMALL_SEEN,
    reload: Loader | None = None,
) -> VerifyResult | None:
    """Walk the tree depth-first; the first failure found by reading (None when none).

    ``track``: ids held exactly (suspects of an earlier walk); every other id is held by its
    salted hash. The first id whose hash was met before is appended to ``suspects`` and ends
    the walk (None: the caller walks again, see the module).

    Signature checks go to ``queue`` (its lists, appended to here: a check, and its receipt,
    parent and counts as a :data:`_Mark`; when :data:`BATCH_BYTES` of bodies or its limit of
    checks is queued, :meth:`_Checks.flush` runs them); the caller runs what is left in it.
    The counts are kept in locals while the walk runs (this loop runs once per receipt): each
    queued check takes them as its mark, and they are written to ``walk`` when the walk ends.
    """
    seen: set[str] = set()
    path: set[str] = set()
    hashes: set[int] = set()
    hashes_add = hashes.add
    prints: Fingerprints | None = None
    owners: list[str | None] = [None]
    stack: list[Iterator[ChildPair]] = [iter(((root_id, root_id),))]
    # bound once: the loop below runs once per receipt of the tree
    seen_add, path_add, disjoint, scan, sha256, key_ids = (
        seen.add,
        path.add,
        path.isdisjoint,
        scan_envelope,
        hashlib.sha256,
        walk.key_ids,
    )
    checks, marks, limit = queue.checks, queue.marks, queue.limit
    queued = 0  # the bytes of the bodies queued in checks
    count = signed = amortized = unknown = deepest = 0
    depth = 0  # of the receipts stack[-1] yields: len(stack) - 1
    failure: tuple[str, str | None, str, str | None] | None = None  # reason, message, rid, parent
    while stack:
        ref = next(stack[-1], None)
        if ref is None:
            stack.pop()
            depth -= 1
            owner = owners.pop()
            if owner is not None:
                path.discard(owner)
            continue
        rid, body_digest = ref
        parent = owners[-1]
        # every receipt on the path has been seen: one look-up covers both on the way through
        # (and only an id tracked is held in seen)
        if body_digest != rid or depth > max_depth or count >= max_receipts or rid in seen:
            if rid in path:
                reason = "cycle"
            elif rid in seen:
                reason = "committed_twice"
            elif body_digest != rid:
                reason = "commitment_mismatch"
            elif depth > max_depth:
                reason = "too_deep"
            else:
                reason = "too_many"
            failure = (reason, None, rid, parent)
            break
        count += 1
        if depth > deepest:
            deepest = depth
        if track and rid in track:
            seen_add(rid)
        elif prints is None:
            hashed = hash(rid)
            if hashed in hashes:
                suspects.append(rid)
                break
            hashes_add(hashed)
            if count == small_seen:  # a large tree: fingerprints from here on (see the module)
                prints = Fingerprints(hashes)
                hashes.clear()
        elif prints.add(hash(rid)):
            suspects.append(rid)
            break
        if depth or root_bytes is None:
            data: bytes | None = load(rid)  # what it raises: see verify_tree
        else:
            data = root_bytes
        if data is None:
            failure = ("not_found" if depth == 0 else "child_missing", None, rid, parent)
            break
        parts = scan(data)
        if parts is None or DIGEST_PREFIX + sha256(parts[0]).hexdigest() != rid:
            # not the common shape, or not this receipt's bytes: the strict parser and the
            # checks in their order, then the loader's second look (see verify_tree)
            parts, why = _slowly(data, rid, path, None if data is root_bytes else reload)
            if parts is None:
                failure = (why[0], why[1], rid, parent)
                break
        body_bytes, key_id, signature, children = parts
        if children:
            path_add(rid)  # on the path from here: a child that is rid or on it is a cycle
            if not disjoint(map(_FIRST, children)):
                failure = ("cycle", None, rid, parent)
                break
        if key_id not in key_ids:
            key_ids[key_id] = None
        if signature is None:
            if depth == 0:
                walk.unverified = walk.unverified or ("unsigned", rid, parent)
            else:
                amortized += 1
        else:
            key = trusted.get(key_id)
            if key is None:
                unknown += 1
                walk.unverified = walk.unverified or ("unknown_key", rid, parent)
            else:
                checks.append((key, signature, body_bytes))
                # its mark: the counts stopping at this receipt reports (a _Snap)
                marks.append(
                    (rid, parent, (count, signed, amortized, unknown, deepest, len(key_ids)))
                )
                signed += 1
                queued += len(body_bytes)
                if len(checks) >= limit or queued >= BATCH_BYTES:
                    failed = queue.flush(walk, root_id)
                    if failed is not None:
                        return failed
                    checks, marks, queued = queue.checks, queue.marks, 0
        if children:
            stack.append(iter(children))
            depth += 1
            owners.append(rid)
    walk.count, walk.signed, walk.amortized, walk.unknown = count, signed, amortized, unknown
    walk.depth = deepest
    if failure is None:
        return None
    reason, message, rid, parent = failure
    return _invalid(walk, root_id, reason, message, rid, parent)


def _slowly(
    data: bytes, rid: str, path: set[str], reload: Loader | None
) -> tuple[Scanned | None, tuple[str, str | None]]:
    """The parts of receipt ``rid`` read as ``data``, checked in the documented order (the
    strict parser, no ancestor committed, the body's digest) and ``("", None)``; else None
    and the first failure, as ``(reason, message)``. When ``data`` fails and ``reload`` gives
    other bytes for ``rid``, those are checked instead, and their parts or failure are the
    answer."""
    parts, why = _checked(data, rid, path)
    if parts is None and reload is not None:
        again = reload(rid)  # what it raises: see verify_tree
        if again is not None and again != data:
            return _checked(again, rid, path)
    return parts, why


def _checked(
    data: bytes, rid: str, path: set[str]
) -> tuple[Scanned | None, tuple[str, str | None]]:
    parts = scan_envelope(data)
    if parts is None:  # not the common shape: the strict parser accepts it or says why
        from proctor.receipts.model import parse_envelope

        try:
            env = parse_envelope(data)
        except ReceiptInvalid as exc:
            return None, (exc.code, exc.message)
        parts = (env.body_bytes, env.key_id, env.signature, env.children)
    for child_id, _ in parts[3]:
        if child_id == rid or child_id in path:
            return None, ("cycle", None)
    if DIGEST_PREFIX + hashlib.sha256(parts[0]).hexdigest() != rid:
        return None, ("digest_mismatch", None)
    return parts, ("", None)


def _invalid(
    walk: _Walk,
    root_id: str | None,
    reason: str,
    message: str | None,
    rid: str | None,
    parent: str | None,
) -> VerifyResult:
    text = message if message is not None else _MESSAGES.get(reason, reason)
    return _result(walk, "invalid", root_id, reason, text, rid, parent)


def _result(
    walk: _Walk,
    status: Status,
    root_id: str | None,
    reason: str,
    detail: str,
    rid: str | None,
    parent: str | None,
) -> VerifyResult:
    message = f"receipt {rid}: {detail}" if rid is not None and status != "verified" else detail
    return VerifyResult(
        status=status,
        reason=reason,
        message=message,
        receipt_id=root_id,
        failing_receipt_id=rid,
        parent_id=parent,
        receipts=walk.count,
        signed=walk.signed,
        amortized=walk.amortized,
        unknown_key=walk.unknown,
        depth=walk.depth,
        key_ids=tuple(walk.key_ids),
    )

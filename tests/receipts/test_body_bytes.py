"""The writer's direct body bytes against the generic canonicalizer and the strict rules.

``plain_body`` writes a receipt body by concatenation instead of dict → canonical JSON →
recognizer. These properties hold it to the generic route: whenever it answers, its bytes are
exactly ``canonical(body)``, the envelope is recognized by the verifier's fast scanner and the
body passes the strict rules; and the writer's receipts are byte-identical to ``seal`` of the
dict the generic route builds, whichever route the writer took.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.errors import ReceiptInvalid, UsageError
from proctor.receipts.body_bytes import plain_body
from proctor.receipts.canonical import canonical
from proctor.receipts.model import (
    OUTCOMES,
    RECEIPT_SCHEMA,
    SEAL_REASONS,
    Subject,
    check_body,
    encode_envelope,
    format_time,
)
from proctor.receipts.scan import recognized
from proctor.receipts.writer import ReceiptWriter, Ref, seal
from proctor.runtime.records.receipts import ReceiptStore
from tests.receipt_files import stored
from tests.receipts.helpers import PKG, T0, fixed_clock, signer

_HEX = st.text("0123456789abcdef", min_size=64, max_size=64)
_DIGESTS = st.one_of(st.none(), _HEX.map(lambda h: "sha256:" + h))
# names: plain ones, empty, with a quote or backslash or control, non-ASCII, a lone surrogate
_NAMES = st.one_of(
    st.none(),
    st.sampled_from(["main", "s1", "echo", "a b", "x~y", "", '"q"', "back\\slash", "t\tab"]),
    st.text(max_size=8),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7F), min_size=1, max_size=8),
)
# names the direct route writes (half the cases draw only these, so it is exercised)
_CLEAN_TEXT = (
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters='"\\'),
            min_size=1, max_size=8)
)  # fmt: skip
_CLEAN = st.one_of(st.none(), _CLEAN_TEXT, _CLEAN_TEXT, _CLEAN_TEXT)
# a child's ids: digests, or (for a ref made elsewhere) something that is not one
_IDS = st.one_of(
    _HEX.map(lambda h: "sha256:" + h),
    st.sampled_from(["sha256:" + "A" * 64, "sha256:" + "0" * 63, "nope", "sha256:" + "é" * 64]),
)


# a run's audit head: plain ones, then each rule the strict route refuses (or writes otherwise)
_HEADS = st.one_of(
    st.none(),
    st.builds(
        lambda lines, h: {"lines": lines, "last_digest": "sha256:" + h},
        st.integers(1, 10**15 - 1),
        _HEX,
    ),
    st.just({"lines": 0, "last_digest": None}),
    st.sampled_from(
        [
            {"lines": 0, "last_digest": "sha256:" + "a" * 64},
            {"lines": 3, "last_digest": None},
            {"lines": 10**15, "last_digest": "sha256:" + "a" * 64},
            {"lines": -1, "last_digest": "sha256:" + "a" * 64},
            {"lines": True, "last_digest": "sha256:" + "a" * 64},
            {"lines": 2, "last_digest": "sha256:" + "A" * 64},
            {"lines": 2, "last_digest": "sha256:" + "a" * 64, "more": 1},
            {"lines": 0, "other": None},
            {"lines": 2},
        ]
    ),
)
# a run's package identity: plain ones, and ones JSON escapes or the strict rules refuse
_IDENTITIES = st.one_of(
    st.none(),
    st.sampled_from(["local:skills/one", "core:hello", "registry:acme/tool", "local:a b~c"]),
    _CLEAN_TEXT.map(lambda t: "local:" + t),
    st.sampled_from(
        ["local:", "nope:x", 'local:"q"', "local:back\\slash", "local:é", "local:\t", ""]
    ),
    st.just("local:" + "x" * 1018),  # 1,024 characters: the longest there is
    st.just("local:" + "x" * 1019),
)


@st.composite
def fields(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["run", "step", "call", "segment"]))
    names = _CLEAN if draw(st.booleans()) else _NAMES
    outcome = draw(st.sampled_from(OUTCOMES))
    reason = None if outcome == "completed" else draw(st.sampled_from([None, *SEAL_REASONS]))
    start = T0 + timedelta(microseconds=draw(st.integers(0, 10**9)))
    end = start + timedelta(microseconds=draw(st.integers(0, 10**9)))
    if names is _CLEAN:  # what each kind must name, named (else the subject rule decides)
        must = (kind != "call", kind == "step", kind == "call")
        named = [draw(_CLEAN_TEXT if m else _CLEAN) for m in must]
    else:
        named = [draw(names) for _ in range(3)]
    base = 7 << 40
    children = []
    segment = kind == "segment" and names is _CLEAN  # one a segment may be: no inputs, a child
    for n in range(draw(st.integers(1 if segment else 0, 4))):
        rid = draw(_IDS if names is _NAMES else _DIGESTS.filter(bool))
        mine = draw(st.booleans()) and rid.startswith("sha256:") and rid[7:].isascii()
        if mine:
            rid = "sha256:" + format(n, "064x")  # what this writer made: a digest
        body_digest = rid if mine or names is _CLEAN else draw(st.one_of(st.just(rid), _IDS))
        children.append(Ref(rid, body_digest, "call", "completed", 1, 0, base + n if mine else -1))
    digests = [None, None] if segment else [draw(_DIGESTS), draw(_DIGESTS)]
    return {
        "kind": kind,
        "subject": Subject(draw(names) or "skill", draw(_DIGESTS), *named),
        "outcome": outcome,
        "seal_reason": reason,
        "started": format_time(start),
        "ended": format_time(end),
        "inputs_digest": digests[0],
        "outputs_digest": digests[1],
        "authority_digest": draw(_DIGESTS),
        "policy_digest": draw(_DIGESTS),
        "children": children,
        "own": range(base, base + 4),
        "key_id": signer().key_id,
        "spend_micro_usd": draw(
            st.none()
            if segment
            else st.one_of(st.none(), st.integers(0, 10**15 - 1))
            if names is _CLEAN
            else st.one_of(st.none(), st.integers(-5, 10**16), st.sampled_from([0, 10**15]))
        ),
        # drawn for every kind: a step's or call's is refused by both routes
        "audit_head": draw(_HEADS) if kind == "run" or draw(st.booleans()) else None,
        "identity": draw(_IDENTITIES) if kind == "run" or draw(st.booleans()) else None,
    }


def _dict(f: dict[str, Any]) -> dict[str, Any]:
    """The body the writer's generic route builds from the same fields."""
    body: dict[str, Any] = {
        "schema": RECEIPT_SCHEMA,
        "kind": f["kind"],
        "subject": f["subject"].to_json(),
        "inputs_digest": f["inputs_digest"],
        "outputs_digest": f["outputs_digest"],
        "outcome": f["outcome"],
        "seal_reason": f["seal_reason"],
        "authority_digest": f["authority_digest"],
        "policy_digest": f["policy_digest"],
        "verdicts": [],
        "started_at": f["started"],
        "ended_at": f["ended"],
        "children": [
            {"receipt_id": c.receipt_id, "body_digest": c.body_digest} for c in f["children"]
        ],
        "key_id": f["key_id"],
        "audit_head": None if f["audit_head"] is None else dict(f["audit_head"]),
    }
    if f["spend_micro_usd"] is not None:
        body["spend_micro_usd"] = f["spend_micro_usd"]
    if f["identity"] is not None:
        body["identity"] = f["identity"]
    return body


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields())
def test_direct_bytes_are_the_canonical_bytes_and_always_recognized(f: dict[str, Any]) -> None:
    kind = f.pop("kind")
    subject = f.pop("subject")
    data = plain_body(kind, subject, **f)
    f.update(kind=kind, subject=subject)
    if data is None:
        return  # the generic route judges it
    body = _dict(f)
    assert data == canonical(body)
    check_body(body)  # the strict rules accept it
    for sig in (None, "AAAA"):
        if sig is None and kind not in ("call", "segment"):
            continue
        assert recognized(encode_envelope(data, f["key_id"], sig))


def test_the_common_shapes_take_the_direct_route() -> None:
    """Not a vacuous property: the usual call, step and run bodies are written directly."""
    own = range(0, 10)
    child = Ref("sha256:" + "1" * 64, "sha256:" + "1" * 64, "call", "completed", 1, 0, 3)
    common: dict[str, Any] = {
        "outcome": "completed",
        "seal_reason": None,
        "started": format_time(T0),
        "ended": format_time(T0),
        "inputs_digest": PKG,
        "outputs_digest": None,
        "authority_digest": None,
        "policy_digest": None,
        "own": own,
        "key_id": signer().key_id,
        "spend_micro_usd": None,
    }
    for kind, subject, children in (
        ("call", Subject("hello", PKG, "main", "s1", "echo"), []),
        ("step", Subject("hello", PKG, "main", "s1"), [child]),
        ("run", Subject("hello", PKG, "main"), [child]),
    ):
        assert plain_body(kind, subject, children=children, **common) is not None
    # a sealed run's receipt: its audit head and its package identity
    head = {"lines": 2, "last_digest": PKG}
    run = Subject("hello", PKG, "main")
    data = plain_body("run", run, children=[child], audit_head=head, identity="local:a", **common)
    assert data is not None and b'"identity":"local:a"' in data
    assert plain_body("step", run, children=[child], audit_head=head, **common) is None
    # a foreign child whose ids are not digests, a step without its step_id: generic route
    bad = Ref("sha256:" + "G" * 64, "sha256:" + "1" * 64, "call", "completed", 1, 0, -1)
    assert plain_body("step", Subject("hello", PKG, "main", "s1"), children=[bad], **common) is None
    assert plain_body("step", Subject("hello", PKG, "main"), children=[child], **common) is None


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=fields())
def test_the_writers_receipts_equal_seal_of_the_generic_body(
    tmp_path_factory: pytest.TempPathFactory, case: dict[str, Any]
) -> None:
    """End to end: the writer's bytes equal ``seal`` of the dict, or it refuses the fields."""
    folder = tmp_path_factory.mktemp("w")
    writer = ReceiptWriter(ReceiptStore(folder), signer(), clock=fixed_clock)
    subject: Subject = case["subject"]
    foreign = [c for c in case["children"] if c.serial == -1]  # refs of this writer are its own
    try:
        ref = writer.write(
            case["kind"],
            subject,
            outcome=case["outcome"],
            seal_reason=case["seal_reason"],
            started_at=T0,
            ended_at=T0,
            inputs_digest=case["inputs_digest"],
            outputs_digest=case["outputs_digest"],
            authority_digest=case["authority_digest"],
            policy_digest=case["policy_digest"],
            children=foreign,
            spend_micro_usd=case["spend_micro_usd"],
            audit_head=case["audit_head"],
            identity=case["identity"],
        )
        writer.flush()
    except (UsageError, ReceiptInvalid):
        return  # refused before writing anything
    f = dict(case, started=format_time(T0), ended=format_time(T0), children=foreign)
    unsigned = case["kind"] in ("call", "segment")
    receipt_id, data = seal(_dict(f), signer(), signed=not unsigned)
    assert ref.receipt_id == receipt_id
    assert stored(folder)[receipt_id] == data


class _Posing(str):
    """A name whose text is its own but which claims to equal (and hashes as) ``hello``."""

    def __eq__(self, other: object) -> bool:
        return other == "hello" or str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash("hello")


def test_a_subject_head_written_before_is_never_taken_for_a_name_posing_as_its_own(
    tmp_path: Any,
) -> None:
    """The subject text a seal remembers is keyed by its names' values: a subclass of str that
    claims to equal a remembered name gets its own text written (or is refused), never the
    remembered one."""
    writer = ReceiptWriter(ReceiptStore(tmp_path), signer(), clock=fixed_clock)
    fields: dict[str, Any] = {"outcome": "completed", "started_at": T0, "inputs_digest": PKG}
    writer.call(Subject("hello", PKG, "main", "s1", "echo"), **fields)
    for posing in (
        Subject(_Posing("other"), PKG, "main", "s1", "echo"),
        Subject("hello", PKG, _Posing("other"), "s1", "echo"),
    ):
        try:
            ref = writer.call(posing, **fields)
            writer.flush()
        except UsageError:
            continue  # refused: nothing written for it
        data = stored(tmp_path)[ref.receipt_id]
        assert b'"other"' in data
        assert (
            ref.receipt_id
            == "sha256:" + hashlib.sha256(data[8 : data.rindex(b',"key_id"')]).hexdigest()
        )

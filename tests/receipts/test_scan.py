"""The fast receipt recognizer never disagrees with the strict parser.

``scan_envelope`` may decline (return None) anything; whatever it accepts, ``parse_envelope``
must accept with exactly the same parts. Checked on the writer's own receipts (which it must
recognize, or verify would not be fast), on generated bodies over every field's variety, and on
byte-level mutations of valid files.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proctor.errors import ReceiptInvalid
from proctor.receipts.model import OUTCOMES, SEAL_REASONS, parse_envelope
from proctor.receipts.scan import Scanned, recognized, scan_envelope
from proctor.receipts.writer import seal
from proctor.runtime.records.receipts import ReceiptStore
from tests.receipts.helpers import body, signer, small_tree

DIGESTS = [f"sha256:{i:064x}" for i in range(4)]


def _strict(data: bytes) -> Scanned | None:
    try:
        env = parse_envelope(data)
    except ReceiptInvalid:
        return None
    return env.body_bytes, env.key_id, env.signature, env.children


def _agree(data: bytes) -> Scanned | None:
    fast = scan_envelope(data)
    assert recognized(data) is (fast is not None)  # the writer's check: the same answer
    if fast is not None:
        assert fast == _strict(data)
    return fast


def test_the_writers_receipts_are_recognized(tmp_path: Path) -> None:
    store = ReceiptStore(tmp_path / "r")
    refs = small_tree(store)
    for ref in refs.values():
        data = store.get(ref.receipt_id)
        assert data is not None
        assert _agree(data) is not None, ref


def _sealed(b: dict[str, Any], *, signed: bool = True) -> bytes:
    return seal(b, signer(), signed=signed)[1]


def test_the_common_shapes_are_recognized() -> None:
    s = signer()
    head = {"audit_head": None}
    shapes = [
        body("run", s.key_id, DIGESTS[:2], **head),
        body("run", s.key_id, audit_head={"lines": 3, "last_digest": DIGESTS[0]}),
        body("run", s.key_id, audit_head={"lines": 0, "last_digest": None}, spend_micro_usd=5),
        body("run", s.key_id, **head, reused_from=DIGESTS[1]),
        body("run", s.key_id, **head, identity="local:skills/summ"),
        body("step", s.key_id, **head, context_digests=DIGESTS[:2], spend_micro_usd=0),
        body(
            "step",
            s.key_id,
            **head,
            outcome="failed",
            seal_reason="policy_refused",
            verdicts=[{"rule_id": "r", "code": "", "enforcement": "block"}],
        ),
        body("call", s.key_id, **head, sandbox={"used": "none", "mode": "auto", "network": False}),
        body(
            "call",
            s.key_id,
            **head,
            sandbox={
                "used": "bubblewrap",
                "mode": "required",
                "network": False,
                "verified": True,
                "checks": [{"check": "home_hidden", "held": True}],
                "toolchains": ["/opt/py", "/usr/x"],
            },
        ),
    ]
    for b in shapes:
        assert _agree(_sealed(b)) is not None, b
    assert _agree(_sealed(body("call", s.key_id, **head), signed=False)) is not None


TEXT = st.one_of(
    st.sampled_from(["", "main", "a b", "é", 'q"uote', "back\\slash", "\n", "\x7f", "\u2028"]),
    st.text(max_size=6),
)
MAYBE_TEXT = st.one_of(st.none(), TEXT)
MAYBE_DIGEST = st.one_of(st.none(), st.sampled_from(DIGESTS), st.just("sha256:00"))
NUMBER = st.sampled_from([0, 1, 7, 10**15 - 1, 10**15, 2**53 - 1, -1])
TIME = st.sampled_from(
    ["2026-01-02T03:04:05.000000Z", "2026-01-02T03:04:06.000000Z", "2026-01-02T03:04:05Z"]
)


SAFE_TEXT = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters='"\\'),
    min_size=1,
    max_size=8,
)


@st.composite
def coherent(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    """A body every rule admits (most of them in the shape the fast route knows)."""
    s = signer()
    kind = draw(st.sampled_from(["run", "step", "call"]))
    out = body(kind, s.key_id, draw(st.lists(st.sampled_from(DIGESTS), max_size=3)))
    out["subject"]["skill"] = draw(SAFE_TEXT)
    out["subject"]["method"] = draw(SAFE_TEXT)
    if kind == "step":
        out["subject"]["step_id"] = draw(SAFE_TEXT)
    if kind == "call":
        out["subject"]["tool"] = draw(SAFE_TEXT)
        out["subject"]["method"] = draw(st.one_of(st.none(), SAFE_TEXT))
    out["outcome"] = draw(st.sampled_from(OUTCOMES))
    if out["outcome"] != "completed":
        out["seal_reason"] = draw(st.one_of(st.none(), st.sampled_from(sorted(SEAL_REASONS))))
    out["verdicts"] = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "rule_id": SAFE_TEXT,
                    "code": SAFE_TEXT,
                    "enforcement": st.sampled_from(["warn", "block"]),
                }
            ),
            max_size=2,
        )
    )
    out["audit_head"] = None
    if kind == "run" and draw(st.booleans()):
        lines = draw(st.sampled_from([0, 1, 10**15 - 1, 10**15, 2**53 - 1]))
        out["audit_head"] = {"lines": lines, "last_digest": DIGESTS[0] if lines else None}
    if kind != "call" and draw(st.booleans()):
        out["spend_micro_usd"] = draw(st.sampled_from([0, 3, 10**15 - 1, 2**53 - 1]))
    if kind == "step" and draw(st.booleans()):
        out["context_digests"] = draw(st.lists(st.sampled_from(DIGESTS), min_size=1, max_size=2))
    if kind == "run" and draw(st.booleans()):
        out["reused_from"] = DIGESTS[2]
    if kind == "run" and draw(st.booleans()):
        out["identity"] = draw(IDENTITY)
    if kind == "call" and draw(st.booleans()):
        out["sandbox"] = {
            "used": draw(st.sampled_from(["none", "bubblewrap"])),
            "mode": draw(st.sampled_from(["required", "auto", "off"])),
            "network": draw(st.booleans()),
        }
        if draw(st.booleans()):
            out["sandbox"]["verified"] = draw(st.booleans())
            out["sandbox"]["checks"] = draw(
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "check": st.sampled_from(["home_hidden", "proc_isolated"]),
                            "held": st.booleans(),
                        }
                    ),
                    max_size=2,
                )
            )
            out["sandbox"]["toolchains"] = draw(st.lists(TEXT, max_size=2))
    return out, kind != "call" or draw(st.booleans())


IDENTITY = st.one_of(
    st.sampled_from(["core:weather", "registry:acme/summ", "local:.", "local:outside/0f"]),
    st.builds(lambda k, t: k + t, st.sampled_from(["core:", "local:"]), SAFE_TEXT),
)


# one field replaced by a value from a wider range (often one some rule refuses)
BREAKS: dict[str, st.SearchStrategy[Any]] = {
    "kind": st.sampled_from(["run", "step", "call", "other"]),
    "outcome": st.sampled_from([*OUTCOMES, "done"]),
    "seal_reason": st.one_of(st.none(), st.sampled_from([*SEAL_REASONS, "why"])),
    "started_at": TIME,
    "ended_at": TIME,
    "inputs_digest": MAYBE_DIGEST,
    "key_id": st.sampled_from([DIGESTS[3], "k"]),
    "audit_head": st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {"lines": NUMBER, "last_digest": st.one_of(st.none(), st.just(DIGESTS[0]))}
        ),
    ),
    "spend_micro_usd": NUMBER,
    "context_digests": st.lists(st.sampled_from(DIGESTS), max_size=2),
    "reused_from": MAYBE_DIGEST,
    "identity": st.one_of(
        IDENTITY,
        st.sampled_from(["core:", "local:a\x7f", "other:x", "local:é", "local:" + "a" * 1025, 3]),
        st.builds(lambda t: "local:" + t, TEXT),
    ),
    "sandbox": st.one_of(
        st.fixed_dictionaries(
            {
                "used": st.sampled_from(["none", "bubblewrap", "docker"]),
                "mode": st.sampled_from(["required", "auto", "off"]),
                "network": st.sampled_from([True, False, 0]),
            }
        ),
        st.fixed_dictionaries(
            {
                "used": st.sampled_from(["none", "bubblewrap"]),
                "mode": st.sampled_from(["required", "auto"]),
                "network": st.booleans(),
                "verified": st.sampled_from([True, False, 1, None]),
                "checks": st.lists(
                    st.fixed_dictionaries(
                        {"check": st.sampled_from(["proc_isolated", "", 3]), "held": st.booleans()}
                    ),
                    max_size=2,
                ),
                "toolchains": st.lists(st.one_of(TEXT, st.just(""), st.just(7)), max_size=2),
            }
        ),
    ),
    "verdicts": st.lists(
        st.fixed_dictionaries(
            {
                "rule_id": TEXT,
                "code": TEXT,
                "enforcement": st.sampled_from(["warn", "block", "advisory"]),
            }
        ),
        max_size=2,
    ),
}
SUBJECT_BREAKS: dict[str, st.SearchStrategy[Any]] = {
    "skill": TEXT,
    "package_digest": MAYBE_DIGEST,
    "method": MAYBE_TEXT,
    "step_id": MAYBE_TEXT,
    "tool": MAYBE_TEXT,
}


@st.composite
def bodies(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    out, signed = draw(coherent())
    for _ in range(draw(st.integers(min_value=0, max_value=2))):
        if draw(st.booleans()):
            name = draw(st.sampled_from(sorted(BREAKS)))
            out[name] = draw(BREAKS[name])
        else:
            name = draw(st.sampled_from(sorted(SUBJECT_BREAKS)))
            out["subject"][name] = draw(SUBJECT_BREAKS[name])
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        signed = not signed
    return out, signed


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_generated_bodies_agree(case: tuple[dict[str, Any], bool]) -> None:
    b, signed = case
    _agree(_sealed(b, signed=signed))


def _valid_files() -> list[bytes]:
    s = signer()
    return [
        _sealed(
            body("run", s.key_id, DIGESTS[:2], audit_head={"lines": 3, "last_digest": DIGESTS[1]})
        ),
        _sealed(body("call", s.key_id, audit_head=None), signed=False),
        _sealed(
            body(
                "step",
                s.key_id,
                [DIGESTS[0]],
                audit_head=None,
                outcome="failed",
                seal_reason="tool_failed",
                spend_micro_usd=12,
                verdicts=[{"rule_id": "r1", "code": "c", "enforcement": "warn"}],
            )
        ),
    ]


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(range(3)),
    st.integers(min_value=0),
    st.sampled_from(["flip", "insert", "delete", "swap"]),
    st.integers(min_value=0, max_value=255),
)
def test_mutated_files_agree(which: int, at: int, how: str, byte: int) -> None:
    data = bytearray(_valid_files()[which])
    i = at % len(data)
    if how == "flip":
        data[i] = byte
    elif how == "insert":
        data.insert(i, byte)
    elif how == "delete":
        del data[i]
    else:
        j = (i + byte) % len(data)
        data[i], data[j] = data[j], data[i]
    _agree(bytes(data))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (b'"lines":3', b'"lines":03'),
        (b'"lines":3', b'"lines":-3'),
        (b'"lines":3', b'"lines":9007199254740992'),
        (b'"kind":"run"', b'"kind":"step"'),  # an audit head on a step
        (b'"method":"main"', b'"method":null'),
        (b'"method":"main"', b'"method":""'),
        (b'"children":[', b'"children": ['),
        (b'"audit_head":{', b'"audit_head" :{'),
        (b"}\n", b"}"),
        (b"}\n", b"}\n\n"),
        (b'"completed"', b'"failed"'),
    ],
)
def test_named_breaks_are_never_accepted_fast(old: bytes, new: bytes) -> None:
    data = _valid_files()[0]
    assert old in data
    broken = data.replace(old, new, 1)
    assert scan_envelope(broken) is None or _strict(broken) is not None
    _agree(broken)


@pytest.mark.parametrize("field", [b"key_id", b"package_digest"])
def test_a_digest_byte_0x80_is_never_accepted_fast(field: bytes) -> None:
    # the pattern's hex class admits 0x80 (so that it compiles to a bitmap): a digest holding
    # it is the strict parser's to refuse
    data = next(d for d in _valid_files() if b'"' + field + b'":"sha256:' in d)
    found = re.search(b'"' + field + b'":"(sha256:[0-9a-f]{64})"', data)
    assert found is not None
    digest = found.group(1)
    data = data.replace(digest, digest[:9] + b"\x80" + digest[10:])  # every copy (key_id: two)
    assert _strict(data) is None
    assert _agree(data) is None


def test_key_ids_of_many_signers_read_right_and_only_a_few_are_kept() -> None:
    """Key ids are decoded once and kept for the next receipts, up to a bound: past it (a tree
    of many signers) each is decoded afresh, and every receipt still names its own."""
    import proctor.receipts.scan as scan
    from proctor.receipts.signing import signer_from_seed

    scan._KEY_TEXT.clear()
    for i in range(scan._KEYS_KEPT + 6):
        s = signer_from_seed(bytes([i]) * 32)
        _, data = seal(body("step", s.key_id, audit_head=None), s)
        for _ in range(2):
            parts = _agree(data)
            assert parts is not None and parts[1] == s.key_id
    assert len(scan._KEY_TEXT) == scan._KEYS_KEPT
    assert all(text.encode() == raw for raw, text in scan._KEY_TEXT.items())


def _with_children(count: int) -> bytes:
    s = signer()
    return _sealed(body("step", s.key_id, [f"sha256:{i:064x}" for i in range(count)], **HEAD))


HEAD: dict[str, Any] = {"audit_head": None}


@pytest.mark.parametrize("count", [1, 2, 3, 500])
def test_child_commitments_are_recognized_at_any_count(count: int) -> None:
    data = _with_children(count)
    parts = _agree(data)
    assert parts is not None and len(parts[3]) == count
    assert parts[3][-1] == (f"sha256:{count - 1:064x}",) * 2


# what the pattern takes in a child's digest (any byte but a quote) that is not lowercase hex
NOT_HEX = [b"A", b"F", b"g", b"x", b" ", b"\x00", b"\x7f", b"\xff", b"\\", b"'", b",", b"}", b":"]


@pytest.mark.parametrize("count", [1, 3])
@pytest.mark.parametrize("field", [b'"body_digest":"sha256:', b'"receipt_id":"sha256:'])
@pytest.mark.parametrize("byte", NOT_HEX)
def test_a_child_digest_byte_that_is_not_lowercase_hex_is_never_accepted_fast(
    count: int, field: bytes, byte: bytes
) -> None:
    """The pattern takes a child's digests loosely and scan_envelope checks their hex after:
    every other byte, at the first, a middle or the last place of either digest of any child,
    is declined (and the strict parser refuses it)."""
    data = _with_children(count)
    starts = [i + len(field) for i in range(len(data)) if data.startswith(field, i)]
    assert len(starts) == count
    for start in (starts[0], starts[-1]):
        for at in (start, start + 31, start + 63):
            broken = data[:at] + byte + data[at + 1 :]
            assert scan_envelope(broken) is None
            assert _strict(broken) is None


def test_a_child_digest_one_byte_short_or_long_is_never_accepted_fast() -> None:
    data = _with_children(2)
    at = data.index(b'"receipt_id":"sha256:') + len(b'"receipt_id":"sha256:')
    for broken in (data[:at] + data[at + 1 :], data[:at] + b"0" + data[at:]):
        assert scan_envelope(broken) is None
        _agree(broken)


@pytest.mark.parametrize("byte", [b"A", b"g", b" ", b"\\", b"{", b"\xff"])
def test_a_key_id_byte_that_is_not_lowercase_hex_is_never_accepted_fast(byte: bytes) -> None:
    """The pattern takes the key id's 64 characters loosely and scan_envelope checks their hex
    (once a key): a key id with any other byte, at its first, a middle or its last place, is
    declined both ways, also once the right key id has been read before (the strict parser
    refuses it)."""
    data = next(d for d in _valid_files() if b'"signature":"' in d)
    found = re.search(b'"key_id":"sha256:([0-9a-f]{64})"', data)
    assert found is not None
    key = found.group(1)
    assert scan_envelope(data) is not None  # the right key id, read (and kept) first
    for at in (0, 31, 63):
        broken = data.replace(key, key[:at] + byte + key[at + 1 :])  # both copies
        assert scan_envelope(broken) is None and not recognized(broken)
        assert _strict(broken) is None


@pytest.mark.parametrize("byte", [b"-", b"_", b" ", b"\\", b"\x7f", b"\xff", b"\n"])
def test_a_signature_byte_outside_base64_is_never_accepted_fast(byte: bytes) -> None:
    """The pattern takes a signature's text as any bytes but a quote: its strict decoding
    declines any other byte (and the strict parser refuses it)."""
    data = next(d for d in _valid_files() if b'"signature":"' in d)
    at = data.index(b'"signature":"') + len(b'"signature":"')
    for where in (at, at + 40, data.index(b'"', at) - 1):
        broken = data[:where] + byte + data[where + 1 :]
        assert scan_envelope(broken) is None and not recognized(broken)
        assert _strict(broken) is None

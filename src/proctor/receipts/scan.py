"""A fast, exact recognizer for the common shape of a receipt file, beside the strict parser.

:func:`~proctor.receipts.model.parse_envelope` decodes the JSON, checks every rule in Python
and re-encodes the document to prove it canonical: about 40 µs per receipt, most of the
non-signature work of ``proctor verify``. :func:`scan_envelope` recognizes the files proctor
writes with one compiled pattern instead (about 5 µs): the pattern spells out the canonical
bytes of an envelope field by field (keys in RFC 8785 order, no whitespace, digests and times
in their exact forms, integers without sign or leading zeros, strings without escapes), and the
few rules that relate one field to another are checked on its captures.

It is a *fast accept*, never a verdict: it returns ``None`` for anything outside that shape
(non-ASCII bytes, an escape in a string, a receipt written before the audit anchor, any rule
broken), and the caller then runs the strict parser, which accepts or names the error exactly
as before. So a file either scans to exactly the parts the strict parser would return, or is
judged by the strict parser: the result never depends on which route was taken (a property
test holds the two together on valid and mutated receipts).
"""

from __future__ import annotations

import binascii
import re

from proctor.receipts.parts import SEAL_REASONS, ChildPair

__all__ = ["Scanned", "recognized", "scan_envelope"]

#: body bytes, key id, signature (None when amortized), child commitments
Scanned = tuple[bytes, str, "bytes | None", tuple[ChildPair, ...]]

# A digest's hex digits are matched as [0-9a-f\x80], and a file holding the byte 0x80 is never
# recognized (see scan_envelope): the files recognized are the same, but a class of three runs
# is kept as a bitmap, one test a byte, where [0-9a-f]'s two runs are two range tests a byte
# (the pattern's match takes a sixth less time)
_HEX = r"sha256:[0-9a-f\x80]{64}"
_NOT_HEX = b"\x80"
_D = rf'"{_HEX}"'
_ND = rf"(?:null|{_D})"
# a string of printable ASCII without an escape (non-empty, or possibly empty): canonical as is
_S = r'"[\x20\x21\x23-\x5b\x5d-\x7f]+"'
_S0 = r'"[\x20\x21\x23-\x5b\x5d-\x7f]*"'
_T = r'"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z"'
# at most 15 digits: below 2**53 - 1 without comparing (larger values go to the strict parser)
_N = r"(?:0|[1-9][0-9]{0,14})"
# A child commitment, its two digests taken as any 64 bytes but a quote: scan_envelope then
# checks every one of them is lowercase hex at once (a 10,000-child step reads in a third of
# the time the pattern's per-byte class check takes).
_CHILD = r'\{"body_digest":"sha256:[^"]{64}","receipt_id":"sha256:[^"]{64}"\}'
_VERDICT = rf'\{{"code":{_S0},"enforcement":"(?:warn|block)","rule_id":{_S0}\}}'
_REASONS = "|".join(sorted(SEAL_REASONS))
# A call's sandbox: as written before the self-test ({mode, network, used}), or with its answer
# and the toolchains bound (all three keys, or none of them)
_CHECK = r'\{"check":"[a-z_]{1,64}","held":(?:true|false)\}'
_SANDBOX = (
    r'"sandbox":\{(?:"mode":"(?:required|auto|off)","network":(?:true|false),'
    r'"used":"(?:bubblewrap|none)"'
    rf'|"checks":\[(?:{_CHECK}(?:,{_CHECK})*)?\],"mode":"(?:required|auto|off)",'
    rf'"network":(?:true|false),"toolchains":\[(?:{_S}(?:,{_S})*)?\],'
    r'"used":"(?:bubblewrap|none)","verified":(?:true|false))\},'
)
# A run's package identity: printable ASCII without an escape (its length is checked on the
# capture; one with other characters goes to the strict parser)
_IDENTITY = r'"identity":"(?:core|registry|local):[\x20\x21\x23-\x5b\x5d-\x7e]+"'
_IDENTITY_MAX = len('"identity":"",') + 1024  # the capture holds its comma
# The rules that relate fields are written into the pattern with conditionals, (?(name)a|b):
# an audit head is a run's; a step names its step_id, a run and a step their method, a call
# its tool; only a call may be unsigned; a completed receipt has no seal_reason; the
# envelope's key_id is the body's. The rare optional fields are checked in scan_envelope. The
# key id's 64 characters and the signature's text are taken as any bytes but a quote (a
# class test a byte costs the match some five times as much): scan_envelope checks the key
# id as hex (once a key), and decodes the signature with a2b_base64 in strict mode, which
# refuses any byte outside the base64 alphabet.
_PATTERN = (
    r'\{"body":(?P<body>'
    rf'\{{"audit_head":(?:(?P<nohead>null)|\{{"last_digest":(?:(?P<nolast>null)|{_D}),'
    rf'"lines":(?(nolast)0|[1-9][0-9]{{0,14}})\}}),'
    rf'"authority_digest":{_ND},'
    rf'"children":\[(?P<children>(?:{_CHILD}(?:,{_CHILD})*)?)\],'
    rf'(?P<context>"context_digests":\[{_D}(?:,{_D})*\],)?'
    rf'"ended_at":(?P<ended>{_T}),'
    rf"(?P<identity>{_IDENTITY},)?"
    rf'"inputs_digest":(?P<inputs>{_ND}),'
    r'"key_id":"(?P<key>sha256:[^"]{64})",'
    r'"kind":(?(nohead)"(?:(?P<unsigned>(?P<call>call)|(?P<segment>segment))|(?P<step>step)|run)"'
    r'|"run"),'
    r'"outcome":(?:"(?P<completed>completed)"|"(?:failed|blocked|declined|superseded|killed)"),'
    rf'"outputs_digest":(?P<outputs>{_ND}),'
    rf'"policy_digest":{_ND},'
    rf'(?P<reused>"reused_from":{_D},)?'
    rf"(?P<sandbox>{_SANDBOX})?"
    r'"schema":"proctor\.receipt\.v1",'
    rf'"seal_reason":(?(completed)null|(?:null|"(?:{_REASONS})")),'
    rf'(?P<spend>"spend_micro_usd":{_N},)?'
    rf'"started_at":(?P<started>{_T}),'
    rf'"subject":\{{"method":(?(call)(?:null|{_S})|{_S}),"package_digest":{_ND},"skill":{_S},'
    rf'"step_id":(?(step){_S}|(?:null|{_S})),"tool":(?(call){_S}|(?:null|{_S}))\}},'
    rf"\"verdicts\":\[(?P<verdicts>(?:{_VERDICT}(?:,{_VERDICT})*)?)\]\}}),"
    r'"key_id":"(?P=key)",'
    r'"signature":(?(unsigned)(?:null|"(?P<csig>[^"]+)")|"(?P<sig>[^"]+)")\}\n'
)
# over bytes: every byte the pattern admits is ASCII, so no decoding is needed first
_ENVELOPE = re.compile(_PATTERN.encode("ascii"))
_FULLMATCH = _ENVELOPE.fullmatch
# the captures in the order Match.groups() gives them: scan_envelope unpacks that tuple at once
_GROUPS = (
    "body", "nohead", "nolast", "children", "context", "ended", "identity", "inputs", "key",
    "unsigned", "call", "segment", "step", "completed", "outputs", "reused", "sandbox", "spend",
    "started", "verdicts", "csig", "sig",
)  # fmt: skip
if tuple(sorted(_ENVELOPE.groupindex, key=_ENVELOPE.groupindex.__getitem__)) != _GROUPS:
    raise ImportError("scan_envelope's captures are out of step with its pattern")
# each child commitment is {"body_digest":"<71>","receipt_id":"<71>"}, then a comma
_CHILD_AT, _CHILD_RID, _CHILD_STRIDE = 16, 16 + 71 + 16, 177
_a2b = binascii.a2b_base64
_HEX_DIGITS = b"0123456789abcdef"
# what remains of a child commitment and its comma once every hex digit is deleted (its
# digests vanish, and the hex letters of its keys)
_CHILD_LEFT = len(b'{"body_digest":"sha256:","receipt_id":"sha256:"},'.translate(None, _HEX_DIGITS))
#: key ids as text by their bytes: a tree has one or a few signers, so each id is checked and
#: decoded once, and every receipt then carries the same string (whose hash is computed once,
#: not per look-up)
_KEY_TEXT: dict[bytes, str] = {}
_KEYS_KEPT = 64
# what a key id leaves once every hex digit is deleted: its prefix's "sh:" (a character of its
# 64 that is not a lowercase hex digit remains, and makes it longer)
_KEY_LEFT = b"sh:"


def recognized(data: bytes) -> bool:
    """Whether :func:`scan_envelope` recognizes ``data``, without taking its parts out (the
    writer's check of each receipt it makes: the same rules, less work)."""
    return scan_envelope(data, False) is not None


_SEEN: Scanned = (b"", "", None, ())
"""What :func:`scan_envelope` answers for a recognized envelope when its parts are not wanted."""


def scan_envelope(data: bytes, parts: bool = True) -> Scanned | None:
    """The parts of a receipt file in proctor's common canonical shape, else ``None``.

    Returns ``(body_bytes, key_id, signature, children)``, equal to what
    :func:`~proctor.receipts.model.parse_envelope` returns for the same bytes (each child a
    plain ``(receipt_id, body_digest)`` pair where the parser gives a ``ChildRef``). ``None``
    refuses nothing: it means "not recognized here, ask the strict parser". With ``parts``
    False, a recognized envelope's answer holds none of its parts (see :func:`recognized`).
    """
    m = _FULLMATCH(data)
    if m is None or _NOT_HEX in data:
        return None
    (body, _, _, children, context, ended, identity, inputs, key, _, call, segment, step, _,
     outputs, reused, sandbox, spend, started, verdicts, ctext64, text64) = m.groups()  # fmt: skip
    if ended < started:
        return None
    if segment is not None and (
        not children or verdicts or inputs != b"null" or outputs != b"null" or spend or reused
    ):
        return None
    # the rare fields: each belongs to one kind only
    if context or reused or sandbox or spend or identity:
        if identity is not None and (call or step or segment or len(identity) > _IDENTITY_MAX):
            return None
        if context is not None and step is None:
            return None
        if (reused is not None and (call or step)) or (sandbox is not None and not call):
            return None
        if spend is not None and call is not None:
            return None
    # the key id's 64 characters are taken as any but a quote: each key is checked as hex once
    key_id = _KEY_TEXT.get(key)
    if key_id is None:
        if key.translate(None, _HEX_DIGITS) != _KEY_LEFT:
            return None
        key_id = key.decode("ascii")
        if len(_KEY_TEXT) < _KEYS_KEPT:
            _KEY_TEXT[key] = key_id
    if text64 is None:
        text64 = ctext64
    if text64 is None:
        sig = None
    else:
        try:
            sig = _a2b(text64, strict_mode=True)
        except binascii.Error:
            return None
    if not children:
        refs: tuple[ChildPair, ...] = ()
    elif len(children) == _CHILD_STRIDE - 1:  # one child: most receipts of a deep tree
        # the pattern took each digest as 64 bytes but a quote and fixed every other byte:
        # deleting the hex digits must leave the commitment's own text only, so any byte of a
        # digest that is not one remains and makes it longer
        if len(children.translate(None, _HEX_DIGITS)) != _CHILD_LEFT - 1:
            return None
        if not parts:
            return _SEEN
        text = children.decode("ascii")
        refs = ((text[_CHILD_RID : _CHILD_RID + 71], text[_CHILD_AT : _CHILD_AT + 71]),)
    else:
        count = (len(children) + 1) // _CHILD_STRIDE
        if len(children.translate(None, _HEX_DIGITS)) != _CHILD_LEFT * count - 1:
            return None
        if not parts:
            return _SEEN
        text = children.decode("ascii")
        end = len(text)
        refs = tuple(
            zip(
                [text[i : i + 71] for i in range(_CHILD_RID, end, _CHILD_STRIDE)],
                [text[i : i + 71] for i in range(_CHILD_AT, end, _CHILD_STRIDE)],
                strict=True,
            )
        )
    if not parts:
        return _SEEN
    return body, key_id, sig, refs

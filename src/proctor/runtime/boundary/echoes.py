"""The forms a delivered secret can be echoed back in, and the view of a text they are found in.

A tool handed a secret can hand it back changed. :func:`encodings` lists the literal forms of a
value of 8 characters or more: the value and its reverse; its ROT13 and ROT47 (the letter and
printable-ASCII rotations a program reaches for to slip a value past a filter); base64 and
base64url, and base32 (upper and lower case), each at every byte alignment (only the characters
that do not depend on neighbouring bytes); hex (both cases); URL encoding; JSON string escaping.

No list is complete: a program given a secret can always encode it some other way (XOR with a
key, a cipher, one character per request). These forms catch the careless and the usual; the
boundary that holds is that a secret is delivered only where a run's authority sends it.

Two more changes are undone instead of listed, because they combine without bound: HTML/XML
character references (``&#104;``, ``&#x68;``, ``&amp;``: any mix, any case, leading zeros) and
whitespace between characters (a value split by spaces or line breaks, one character a line, or
wrapped in chunks, base64 at 76 columns). :func:`normal` is the text with every reference ending
in ``;`` decoded and then every whitespace character dropped; a form holding no whitespace,
``&`` or ``;`` (:func:`plain`) that occurs in the text occurs in its normal view too, so plain
forms are searched there alone. :func:`normal_map` gives the same view with where each of its
characters came from, to cut a hit out of the original text.

A reference must end in ``;`` to be decoded: decoding ``&#1234`` without one could eat the digits
of a value that follows, and hide it.

Lines joined by a continuation mark are one more form: a backslash at the end of a line (shell,
C, Python, Makefiles) and an ``=`` at the end of a line (a quoted-printable soft break) join the
line to the next, so a value cut there reads whole to the program that joins them.
:func:`joined` is the text with those marks and their line breaks taken out; it is a view of its
own, searched beside the normal view and never instead of it (a value that itself ends in ``=``
before a line break must still be found as it is).
"""

from __future__ import annotations

import base64
import functools
import json
import re
from collections.abc import Callable
from urllib.parse import quote, quote_plus

__all__ = [
    "JOIN_CUES",
    "caseless_encodings",
    "cut",
    "encodings",
    "joined",
    "joined_spans",
    "literal_spans",
    "normal",
    "normal_map",
    "plain",
    "spread",
    "squeezed",
    "views",
]

_REFERENCE = re.compile(r"&(?:#[0-9]{1,8}|#[xX][0-9a-fA-F]{1,7}|[A-Za-z][A-Za-z0-9]{1,31});")
# A run of characters that are neither whitespace nor "&", a reference, or a lone "&": the
# words normal_map walks (whitespace, which both views drop, is what lies between them).
_PIECES = re.compile(r"[^\s&]+|" + _REFERENCE.pattern + "|&")
# a line continuation: a backslash or a quoted-printable "=" right before a line break
_JOIN = re.compile(r"[\\=]\r?\n")
# each kind alone: a form may end in "=" (base64 padding) right before a backslash-joined line
# break, or in a backslash before a quoted-printable one, which joining both would eat
_JOIN_ONE = (re.compile(r"\\\r?\n"), re.compile(r"=\r?\n"))
_JOIN_GAP = r"|[\\=]\r?\n"
JOIN_CUES = ("\\\n", "\\\r\n", "=\n", "=\r\n")
"""The continuation marks :func:`joined` takes out (a text holding none has no joined view)."""
# str.isspace() on ASCII: what str.split() drops, so both views agree
_ASCII_SPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"
_BARE_DROPS = _ASCII_SPACE + b"=\\"


def _cores(raw: bytes, encode: Callable[[bytes], bytes], group: int, bits: int) -> set[str]:
    """Substrings of encode(prefix + raw + suffix) that hold for ANY prefix and suffix.

    The encoding works on ``group``-byte blocks of ``bits``-bit characters, so the encoding of a
    value inside a larger blob depends on its offset modulo ``group``; the characters touched by
    neighbouring bytes are dropped.
    """
    cores: set[str] = set()
    for shift in range(group):
        encoded = encode(b"\0" * shift + raw).decode("ascii")
        head = (shift * 8 + bits - 1) // bits  # chars that depend on the unknown prefix bytes
        body = encoded.rstrip("=")
        tail_bits = ((shift + len(raw)) * 8) % bits
        core = body[head : len(body) - (1 if tail_bits else 0)]
        if len(core) >= 6:
            cores.add(core)
    return cores


_ROT13 = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm",
)
_ROT47 = str.maketrans({chr(c): chr(33 + (c - 33 + 47) % 94) for c in range(33, 127)})


def encodings(value: str) -> set[str]:
    """The case-sensitive literal forms of ``value`` the taint set matches: the value, its
    reverse, its ROT13 and ROT47, URL encodings, JSON escapings, base64 and base64url cores."""
    raw = value.encode("utf-8")
    forms = {value, value[::-1], quote(value, safe=""), quote(value), quote_plus(value)}
    forms |= {value.translate(_ROT13), value.translate(_ROT47)}
    forms |= {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    forms |= _cores(raw, base64.b64encode, 3, 6)
    forms |= _cores(raw, base64.urlsafe_b64encode, 3, 6)
    return forms


def caseless_encodings(value: str) -> set[str]:
    """The forms matched in any letter case, lowered: hex and base32 cores (both encodings
    are written in either case, and mixed case reads the same to a decoder)."""
    raw = value.encode("utf-8")
    return {raw.hex()} | {core.lower() for core in _cores(raw, base64.b32encode, 5, 5)}


def plain(form: str) -> bool:
    """Whether ``form`` holds no whitespace, ``&`` or ``;`` (so :func:`normal` keeps it whole)."""
    return "&" not in form and ";" not in form and not any(c.isspace() for c in form)


def _decoded(match: re.Match[str]) -> str:
    import html  # only text holding a character reference needs it

    return html.unescape(match.group(0))


def joined(text: str) -> str:
    """``text`` with every line continuation (a backslash or ``=`` right before a line break)
    taken out with its line break: the lines a shell or a quoted-printable decoder joins."""
    return _JOIN.sub("", text)


def normal(text: str) -> str:
    """``text`` with ``;``-terminated character references decoded, then whitespace dropped."""
    if "&" in text and ";" in text:
        text = _REFERENCE.sub(_decoded, text)
    return squeezed(text)


def squeezed(text: str) -> str:
    """``text`` with whitespace dropped (references as they are)."""
    if text.isascii():
        # bytes.translate deletes in C, several times faster than str.split and join
        return text.encode("ascii").translate(None, _ASCII_SPACE).decode("ascii")
    return "".join(text.split())


def views(text: str) -> str:
    """What the taint set reads a text as: its :func:`normal` view and, when the text may hold
    a character reference, its :func:`squeezed` one beside it (a line break between, which
    neither holds). The text around a value can make it a reference's digits or name
    (``&#`` + ``12345678`` + ``;``), which the normal view decodes away."""
    view = normal(text)
    if "&" in text and ";" in text:
        return view + "\n" + squeezed(text)
    return view


def normal_map(text: str) -> tuple[str, list[int], list[int]]:
    """:func:`normal` of ``text``, with the start and end in ``text`` of each of its characters.

    A Python loop over the text's words: used only once a form was found in the normal view.
    """
    import html

    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    references = "&" in text and ";" in text
    for piece in _PIECES.finditer(text):
        start, end = piece.span()
        token = piece.group(0)
        if token[0] == "&" and references and _REFERENCE.fullmatch(token):
            for char in html.unescape(token):
                if not char.isspace():
                    chars.append(char)
                    starts.append(start)
                    ends.append(end)
            continue
        chars.append(token)
        starts.extend(range(start, end))
        ends.extend(range(start + 1, end + 1))
    return "".join(chars), starts, ends


@functools.cache
def _references_to() -> dict[str, list[str]]:
    """For each character, the names of the ``;``-terminated named references that decode to
    it alone, and the code points below 160 that decode to something else than themselves
    (``&#128;`` is the euro sign, as in windows-1252)."""
    import html.entities

    out: dict[str, list[str]] = {}
    for name, value in html.entities.html5.items():
        if name.endswith(";") and len(value) == 1:
            out.setdefault(value, []).append(re.escape("&" + name))
    for code in range(160):
        value = html.unescape(f"&#{code};")
        if len(value) == 1 and value != chr(code):
            out.setdefault(value, []).append(f"&#0*{code};|&#[xX]0*{code:x};")
    return out


def _reference_alternatives(char: str) -> str:
    code = ord(char)
    digits = "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{code:x}")
    forms = [re.escape(char), f"&#0*{code};", f"&#[xX]0*{digits};"]
    return "|".join(forms + _references_to().get(char, []))


@functools.cache
def _gap(joins: bool = False) -> str:
    """What may stand between two characters of a form: whitespace, or a reference to it (and,
    with ``joins``, a line continuation)."""
    import html.entities

    spaces = [code for code in range(0x3001) if html.unescape(f"&#{code};").isspace()]
    numeric = [f"&#0*{code};|&#[xX]0*{code:x};" for code in spaces]
    named = [
        re.escape("&" + name)
        for name, value in html.entities.html5.items()
        if name.endswith(";") and value.isspace()
    ]
    return r"(?:\s|" + "|".join(numeric + named) + (_JOIN_GAP if joins else "") + ")*"


@functools.lru_cache(maxsize=256)
def spread(form: str, *, references: bool, caseless: bool, joins: bool = False) -> re.Pattern[str]:
    """A pattern finding, in a text, the stretches whose normal view reads ``form``:
    whitespace allowed between its characters and, with ``references``, each character also
    as a character reference and whitespace references in the gaps.

    Without references it finds exactly what :func:`normal` would; with them it may miss a
    stretch that case folding or a rare reference reads differently, so a caller checks the
    normal view afterwards. With ``joins``, a line continuation may stand in a gap too.
    """
    flags = re.IGNORECASE if caseless else 0
    if not references:
        gap = r"(?:\s" + _JOIN_GAP + ")*" if joins else r"\s*"
        return re.compile(gap.join(re.escape(c) for c in form), flags)
    parts = [f"(?:{_reference_alternatives(c)})" for c in form]
    return re.compile(_gap(joins).join(parts), flags)


def joined_spans(
    text: str, forms: tuple[str, ...], caseless: tuple[str, ...]
) -> tuple[list[tuple[int, int]], list[str], list[str]]:
    """Where ``text``'s joined lines (:func:`joined`, then :func:`normal`) read as one of
    ``forms`` (or of ``caseless``, in any letter case): the stretches of ``text`` that spell
    them, continuations and whitespace between their characters, and the forms found (none
    when ``text`` holds no continuation: its joined view is its normal view)."""
    if not any(cue in text for cue in JOIN_CUES):
        return [], [], []
    seen = [views(joined(text))]
    if ("\\\n" in text or "\\\r\n" in text) and ("=\n" in text or "=\r\n" in text):
        seen += [views(one.sub("", text)) for one in _JOIN_ONE]  # both kinds: each alone too
    lowered = [view.lower() for view in seen]
    references = "&" in text and ";" in text
    hits = [
        form
        for form in forms
        if any(form in view for view in seen) or _marks_kept(form, text, references, False)
    ]
    folded = [
        form
        for form in caseless
        if any(form in view for view in lowered) or _marks_kept(form, text, references, True)
    ]
    found: list[tuple[int, int]] = []
    for group, fold in ((hits, False), (folded, True)):
        for form in group:
            pattern = spread(form, references=references, caseless=fold, joins=True)
            found += [m.span() for m in pattern.finditer(text)]
    return found, hits, folded


def literal_spans(text: str, forms: tuple[str, ...]) -> tuple[list[tuple[int, int]], list[str]]:
    """Where ``text`` spells one of ``forms`` (the forms matched as they are: holding
    whitespace, ``&`` or ``;``) with whitespace or line continuations between its characters:
    the stretches of ``text`` that do, and the forms found. The normal view cannot find them
    there when it rewrites the form itself (a reference of the value's own decoded, its
    whitespace dropped, leaving too little to match)."""
    found: list[tuple[int, int]] = []
    hits = []
    view = _bare(text) if forms else ""
    for form in forms:
        if _bare(form) not in view:
            continue  # a stretch spelling it would read as it here: a search of the text in C
        pattern = spread(form, references=False, caseless=False, joins=True)
        spans = [m.span() for m in pattern.finditer(text)]
        if spans:
            found += spans
            hits.append(form)
    return found, hits


def _bare(text: str) -> str:
    """``text`` without whitespace, ``=`` and backslashes: a stretch of a text that spells a
    form with gaps of whitespace and line continuations reads, bared, as the bared form."""
    if text.isascii():
        return text.encode("ascii").translate(None, _BARE_DROPS).decode("ascii")
    return "".join(text.split()).replace("=", "").replace("\\", "")


def _marks_kept(form: str, text: str, references: bool, caseless: bool) -> bool:
    """Whether ``text`` spells ``form``, a form holding a continuation mark (``=`` or ``\\``)
    of its own, with some line ends read as continuations and others as that mark: the joined
    views take every mark before a line break out, so a value ending a line with its own ``=``
    (``0000000=\\r\\n0=\\n`` for ``00000000=``) reads there in neither of them."""
    if "=" not in form and "\\" not in form:
        return False
    if not references and _bare(form.lower() if caseless else form) not in _bare(
        text.lower() if caseless else text
    ):
        return False
    pattern = spread(form, references=references, caseless=caseless, joins=True)
    return pattern.search(text) is not None


def cut(text: str, found: list[tuple[int, int]], mark: str) -> str:
    """``text`` with each of the ``found`` stretches (overlapping ones merged) replaced by
    ``mark``: where a form was found, in whichever view, cut out of the text itself."""
    spans: list[list[int]] = []
    for start, end in sorted(found):
        if spans and start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    out: list[str] = []
    done = 0
    for start, end in spans:
        out += [text[done:start], mark]
        done = end
    out.append(text[done:])
    return "".join(out)

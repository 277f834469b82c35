"""The pure part of the rendering boundary: every hostile character becomes its escape,
everything else is left exactly as it was (property tests over all of Unicode)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from proctor.core.inert_text import escape_of, is_hostile, pieces, visible

CORPUS = json.loads(
    (Path(__file__).resolve().parents[1] / "assets" / "hostile_text" / "corpus.json").read_text()
)


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_no_hostile_character_survives_and_the_rest_is_kept(text: str) -> None:
    shown, count = visible(text)
    assert not any(is_hostile(c) for c in shown)
    assert count == sum(1 for c in text if is_hostile(c))
    assert "".join(p for p, _ in pieces(text)) == text  # pieces split, never change
    # every character that is not hostile is still there, in order
    rest = iter(shown)
    assert all(c in rest for c in text if not is_hostile(c))


def test_printable_text_newlines_and_tabs_are_untouched() -> None:
    text = "naïve café — 日本語 ✓\n\tindented"
    assert visible(text) == (text, 0)


def test_every_corpus_string_is_made_inert() -> None:
    for entry in CORPUS:
        shown, count = visible(entry["text"])
        assert count > 0 and not any(is_hostile(c) for c in shown), entry["name"]


def test_escapes_name_the_code_point() -> None:
    assert [escape_of(c) for c in "\x1b\x9b\u202e\U000e0041"] == [
        "\\x1b",
        "\\x9b",
        "\\u202e",
        "\\U000e0041",
    ]


def test_the_console_hook_marks_each_escape_and_leaves_form_values_alone() -> None:
    from proctor.console.inert import finalize, form_value, plain

    marked = str(finalize("ls\u202e<b>"))
    assert marked == (
        'ls<span class="inert" title="U+202E shown as its escape">\\u202e</span>&lt;b&gt;'
    )
    assert str(plain("a\x1bb")) == "a\\x1bb"
    assert str(finalize(form_value('a\u202e"b'))) == "a\u202e&#34;b"


def test_every_hostile_code_point_of_this_unicode_is_found() -> None:
    from proctor.core.inert_text import _CANDIDATE

    missed = [
        f"U+{point:04X}"
        for point in range(0x110000)
        if is_hostile(chr(point)) and not _CANDIDATE.match(chr(point))
    ]
    assert not missed, f"add these to _CANDIDATE in proctor.core.inert_text: {missed}"


def test_json_output_escapes_hostile_characters_and_reads_back_the_same() -> None:
    from proctor.cli.render import inert_json

    doc = {"a": "x\x1b]52;\x07\u202e\x9b\x7f\U000e0041 café 日本"}
    text = inert_json(doc)
    assert json.loads(text) == doc and not any(is_hostile(c) for c in text)
    assert "café 日本" in text

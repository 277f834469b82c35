"""A worked turn's call may name an offered tool as the runx reference names turn tools: its
dots written as underscores (``data_digest`` for ``data.digest``). Only a tool the turn offers
is ever reached that way; anything else keeps its name and is refused as before."""

from __future__ import annotations

from proctor.runtime.engine.turn_calls import _offered_name


def test_the_underscore_form_names_the_one_offered_tool() -> None:
    offered = frozenset({"data.digest", "fs.read"})
    assert _offered_name("data_digest", offered) == "data.digest"
    assert _offered_name("fs_read", offered) == "fs.read"
    assert _offered_name("fs.read", offered) == "fs.read"


def test_a_name_not_offered_stays_as_written() -> None:
    offered = frozenset({"fs.read"})
    assert _offered_name("fs_write", offered) == "fs_write"  # refused: not allowed here
    assert _offered_name("fs.write", offered) == "fs.write"
    # two offered tools with the same underscore form: neither is guessed
    assert _offered_name("a_b_c", frozenset({"a.b_c", "a_b.c"})) == "a_b_c"
    # a name offered as written is itself, never another tool
    assert _offered_name("fs_read", frozenset({"fs_read", "fs.read"})) == "fs_read"

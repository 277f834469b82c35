"""A run's data text after an update is ``dumps`` of the stored data merged with the update,
whether the store joins it from the members it kept or decodes the stored text."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proctor.runtime.records.data_text import DataTexts
from proctor.runtime.records.rows import dumps
from proctor.runtime.records.runs import RunRecord
from proctor.runtime.records.sqlite import SQLiteRunStore

leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.sampled_from(["", 'a"b\\c\n', "\u00e9\u4e2d", "sha256:" + "0" * 64])
)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(), inner, max_size=4)
        | st.tuples(inner, inner)
    ),
    max_leaves=20,
)
documents = st.dictionaries(st.text(max_size=8), values, max_size=8)


def _merged(stored: str, update: dict[str, Any] | None) -> str:
    doc = json.loads(stored)
    doc.update(update or {})
    return dumps(doc)


@settings(max_examples=300, deadline=None)
@given(documents, documents, documents)
def test_made_and_merged_texts_are_the_texts_dumps_gives(
    data: dict[str, Any], first: dict[str, Any], second: dict[str, Any]
) -> None:
    texts = DataTexts()
    made = texts.made("r", data)
    assert made == dumps(data)
    once = texts.merged("r", made, first)  # from the members it kept
    assert once == _merged(made, first)
    assert texts.merged("r", once, second) == _merged(once, second)
    assert DataTexts().merged("r", made, first) == once  # decoded: the same text


def test_a_stored_text_it_did_not_write_is_decoded() -> None:
    texts = DataTexts()
    made = texts.made("r", {"a": 1, "b": [1, 2]})
    elsewhere = dumps({"a": 2, "c": {"d": None}})  # another writer's update since
    assert texts.merged("r", elsewhere, {"e": True}) == _merged(elsewhere, {"e": True})
    assert texts.merged("r", made, None) == made
    assert texts.merged("r", made, {}) == made


@pytest.mark.parametrize(
    "data",
    [{1: "a", 2: "b"}, {"a": (1, 2), "b": 1.5, "c": float("inf")}, {"x": {"b": 1, "a": 2}}],
)
def test_keys_and_values_dumps_converts_are_written_as_dumps_writes_them(
    data: dict[Any, Any],
) -> None:
    texts = DataTexts()
    made = texts.made("r", data)
    assert made == dumps(data)
    assert texts.merged("r", made, {"z": [0]}) == _merged(made, {"z": [0]})
    with pytest.raises(TypeError):  # a number beside the text keys: not sortable, as ever
        dumps({**json.loads(made), 3: "c"})
    with pytest.raises(TypeError):
        texts.merged("r", made, {3: "c"})
    numbered = DataTexts()
    assert numbered.merged("r", "{}", {3: "c", 1: None}) == dumps({3: "c", 1: None})


def test_a_value_dumps_refuses_is_refused_alike() -> None:
    with pytest.raises(TypeError):
        DataTexts().made("r", {"a": object()})
    with pytest.raises(TypeError):
        dumps({"a": object()})


def _row_data(path: Path, run_id: str) -> str:
    with sqlite3.connect(path) as conn:
        return str(conn.execute("SELECT data FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0])


def test_the_store_merges_updates_as_ever_around_other_writers_and_rollbacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "runs.sqlite"
    store = SQLiteRunStore(path)
    store.create_run(RunRecord(run_id="r", skill="s", method="m", data={"b": 1, "a": {"x": 2}}))
    assert _row_data(path, "r") == dumps({"b": 1, "a": {"x": 2}})

    # an update of data it wrote is joined from the members it kept: no decode of the row
    import proctor.runtime.records.data_text as data_text

    def no_decode(text: str) -> Any:
        raise AssertionError("decoded a data text the store wrote itself")

    with monkeypatch.context() as patched:
        patched.setattr(data_text.json, "loads", no_decode)
        store.update_run("r", status="running", data={"c": [1], "b": 3})
    expected = {"b": 3, "a": {"x": 2}, "c": [1]}
    assert _row_data(path, "r") == dumps(expected)

    # another writer's update in between: the row it finds is merged, not the one it kept
    other = SQLiteRunStore(path)
    other.update_run("r", data={"d": "other"})
    other.close()
    expected["d"] = "other"
    store.update_run("r", data={"e": None})
    expected["e"] = None
    assert _row_data(path, "r") == dumps(expected)

    # an update rolled back leaves the row as it was; the next merges with that row
    with pytest.raises(RuntimeError), store.transaction():
        store.update_run("r", data={"f": 1})
        raise RuntimeError("undone")
    assert _row_data(path, "r") == dumps(expected)
    store.update_run("r", data={"g": 2})
    expected["g"] = 2
    assert _row_data(path, "r") == dumps(expected)
    got = store.get_run("r")
    assert got is not None and got.data == expected
    store.close()


def test_a_long_text_is_not_kept_and_is_merged_all_the_same() -> None:
    texts = DataTexts()
    made = texts.made("r", {"big": "x" * 70_000, "a": 1})
    assert not texts._kept  # past the bound: its next update decodes it
    assert texts.merged("r", made, {"b": 2}) == _merged(made, {"b": 2})
    for n in range(100):  # a bounded number of runs
        texts.made(f"r{n}", {"a": n})
    assert len(texts._kept) <= 64


@settings(max_examples=200, deadline=None)
@given(documents, documents)
def test_an_anchor_read_back_is_what_its_text_decodes_to(
    anchor: dict[str, Any], other: dict[str, Any]
) -> None:
    texts = DataTexts()
    text = texts.anchor_text(anchor)
    assert text == dumps(anchor)
    read = texts.anchor(text)  # kept (scalar members) or decoded: the same document
    assert list(read) == list(json.loads(text)) and dumps(read) == text  # (NaN != NaN)
    read.clear()  # a copy: the next read is whole again
    assert dumps(texts.anchor(text)) == text
    stored = dumps(other)  # another writer's text is decoded
    assert list(texts.anchor(stored)) == list(json.loads(stored))
    assert dumps(texts.anchor(stored)) == stored

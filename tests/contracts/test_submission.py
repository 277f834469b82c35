"""The submission contract a worker reads queued rows by (:mod:`proctor.contracts.submission`)."""

from __future__ import annotations

import json

import pytest

from proctor.contracts.json_strict import MAX_DEPTH
from proctor.contracts.submission import (
    MAX_BODY_BYTES,
    ResumeBody,
    StartBody,
    dump_body,
    read_body,
)
from proctor.errors import SubmissionRefused

RUN = "0" * 31 + "1"


def _nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def test_what_a_submitter_writes_a_worker_reads_back() -> None:
    start = StartBody(
        ref="appender#main",
        cwd="sub/dir",
        inputs={"line": "é\x00", "deep": _nested(MAX_DEPTH - 1)},
        cli_inputs=["a=b"],
        authority={"effects": "ask"},
        profile="work",
    )
    text = dump_body(start)
    assert read_body("start", RUN, text, len(text.encode())) == start
    resume = ResumeBody(document={"approvals": {}})
    text = dump_body(resume)
    assert read_body("resume", RUN, text, len(text.encode())) == resume


def test_documents_as_deep_as_a_boundary_allows_fit_inside_a_body() -> None:
    ok = json.dumps({"ref": "x", "inputs": {"v": _nested(MAX_DEPTH - 1)}})
    assert read_body("start", RUN, ok, len(ok)).inputs is not None
    deep = json.dumps({"ref": "x", "inputs": {"v": _nested(MAX_DEPTH)}})
    with pytest.raises(SubmissionRefused) as caught:
        read_body("start", RUN, deep, len(deep))
    assert caught.value.code == "too_deep"


@pytest.mark.parametrize(
    ("kind", "run_id", "text", "code", "where"),
    [
        ("start", RUN, "[]", "submission_invalid", "not one JSON object"),
        ("start", RUN, "{}", "submission_invalid", "at ref"),
        ("start", RUN, '{"ref": ""}', "submission_invalid", "at ref"),
        ("start", RUN, '{"ref": "x", "cwd": "a/../.."}', "submission_invalid", "cwd"),
        ("start", RUN, '{"ref": "x", "cwd": "/etc"}', "submission_invalid", "cwd"),
        ("start", RUN, '{"ref": "x\\u0000"}', "submission_invalid", "NUL"),
        ("start", RUN, '{"ref": "x", "profile": ["hunter2"]}', "submission_invalid", "profile"),
        ("start", RUN, '{"ref": "x", "inputs": {"a": Infinity}}', "submission_invalid", "JSON"),
        ("start", RUN, '{"ref": "x", "ref": "y"}', "duplicate_key", "repeats a key"),
        ("resume", RUN, '{"document": null}', "submission_invalid", "document"),
        ("resume", RUN, "{}", "submission_invalid", "document"),
        ("resume", "R" * 32, '{"document": {}}', "submission_invalid", "run id"),
        ("Start", RUN, '{"ref": "x"}', "submission_invalid", "kind"),
    ],
)
def test_a_row_that_does_not_fit_is_refused_naming_where(
    kind: str, run_id: str, text: str, code: str, where: str
) -> None:
    with pytest.raises(SubmissionRefused) as caught:
        read_body(kind, run_id, text, len(text))
    assert caught.value.code == code and where in caught.value.message
    assert "hunter2" not in caught.value.message


def test_a_body_over_the_cap_is_refused_unread() -> None:
    with pytest.raises(SubmissionRefused) as caught:
        read_body("start", RUN, None, MAX_BODY_BYTES + 1)
    assert caught.value.code == "submission_too_large"


def test_a_string_that_is_not_text_is_never_queued() -> None:
    with pytest.raises(SubmissionRefused) as caught:
        dump_body(StartBody(ref="x", inputs={"a": "\ud800"}))
    assert caught.value.code == "submission_invalid"


@pytest.mark.parametrize("depth", [MAX_DEPTH, 100_000])
def test_a_body_a_worker_would_refuse_as_too_deep_is_never_queued(depth: int) -> None:
    ok = StartBody(ref="x", inputs={"v": _nested(MAX_DEPTH - 1)})
    text = dump_body(ok)
    assert read_body("start", RUN, text, len(text.encode())) == ok
    with pytest.raises(SubmissionRefused) as caught:
        dump_body(StartBody(ref="x", inputs={"v": _nested(depth)}))
    assert caught.value.code == "too_deep"

"""Test files are read by the strict loader: unknown fields, missing ones and wrong shapes are
refused with file:line:column, and never echo a value."""

from __future__ import annotations

import pytest

from proctor.contracts.testfile import JsonBody, TextBody
from proctor.errors import ParseError
from proctor.parser.testfile import parse_test_file

SKETCH = """\
method: forecast
inputs: {city: Oslo}
host:
  approvals: {post: true}
providers:
  http:
    - request: {method: GET, url: "https://api.example.com/forecast?city=Oslo"}
      response: {status: 200, headers: {content-type: text/plain}, body: "sunny"}
expect:
  status: sealed
  outcome: completed
  output: {subset: {get: {status: 200, body: "sunny"}}}
  absent: [/get/headers/authorization]
"""


def test_the_design_sketch_reads() -> None:
    test = parse_test_file(SKETCH, "tests/forecast.yaml")
    assert test.method == "forecast"
    assert test.host.approvals == {"post": True}
    (exchange,) = test.providers.http
    assert exchange.request.body == "none"
    assert test.expect.output is not None
    assert test.expect.output.mode == "subset"
    assert test.expect.absent == ["/get/headers/authorization"]


@pytest.mark.parametrize(
    ("text", "code", "where", "path"),
    [
        (
            "expect:\n  status: sealed\n  outcom: completed\n",
            "test_unknown_field",
            "3:3",
            "expect.outcom",
        ),
        ("methd: x\nexpect: {status: sealed}\n", "test_unknown_field", "1:1", "methd"),
        (
            "expect: {status: sealed}\nproviders:\n  http:\n    - request:\n        method: GET\n"
            "        url: https://a.example/\n        body: {jsn: 1}\n",
            "test_unknown_field",
            "7:16",
            "providers.http[0].request.body.jsn",
        ),
        ("method: x\n", "test_missing_field", "1:1", "expect"),
        ("expect: {status: done}\n", "test_invalid", "1:10", "expect.status"),
        (
            "expect:\n  status: sealed\n  steps: {a: {outcome: done}}\n",
            "test_invalid",
            "3:15",
            "expect.steps.a.outcome",
        ),
        (
            "expect: {status: sealed, output: {exact: 1, subset: 1}}\n",
            "test_invalid",
            "1:26",
            "expect.output",
        ),
        (
            "host:\n  answers: {t: 1}\n  turns: {t: {output: 1}}\nexpect: {status: sealed}\n",
            "test_invalid",
            "1:1",
            "host",
        ),
        (
            "host:\n  turns: {t: {calls: []}}\nexpect: {status: sealed}\n",
            "test_invalid",
            "2:11",
            "host.turns.t",
        ),
        (
            "expect: {status: sealed, absent: [no-slash]}\n",
            "test_invalid",
            "1:35",
            "expect.absent[0]",
        ),
        (
            "providers:\n  http:\n    - request: {method: GET, url: 'https://a.example/#f'}\n"
            "expect: {status: sealed}\n",
            "test_invalid",
            "3:30",
            "providers.http[0].request.url",
        ),
        ("expect: {status: sealed, files: {a: {}}}\n", "test_invalid", "1:34", "expect.files.a"),
    ],
)
def test_refusals_name_the_field_and_where(text: str, code: str, where: str, path: str) -> None:
    with pytest.raises(ParseError) as refused:
        parse_test_file(text, "tests/t.yaml")
    assert refused.value.code == code
    assert str(refused.value).startswith(f"tests/t.yaml:{where}: "), str(refused.value)
    assert refused.value.details["path"] == path


def test_a_refusal_never_shows_the_value() -> None:
    text = "setup:\n  credentials: {svc: [hunter2-secret-value]}\nexpect: {status: sealed}\n"
    with pytest.raises(ParseError) as refused:
        parse_test_file(text, "tests/t.yaml")
    assert "hunter2" not in str(refused.value)
    assert "hunter2" not in repr(refused.value.details)


def test_yaml_the_strict_loader_refuses_is_refused() -> None:
    with pytest.raises(ParseError) as refused:
        parse_test_file("a: &x 1\nb: *x\n", "tests/t.yaml")
    assert refused.value.code == "yaml_anchor"
    with pytest.raises(ParseError) as refused:
        parse_test_file("- 1\n", "tests/t.yaml")
    assert refused.value.code == "test_not_mapping"


def test_bodies_and_values() -> None:
    text = """
providers:
  http:
    - request: {method: POST, url: "https://a.example/", body: {json: null}}
    - request: {method: POST, url: "https://a.example/", body: {text: "a b"}}
expect: {status: sealed, output: {exact: null}}
"""
    test = parse_test_file(text, "tests/t.yaml")
    first, second = test.providers.http
    assert isinstance(first.request.body, JsonBody) and first.request.body.json_ is None
    assert isinstance(second.request.body, TextBody) and second.request.body.text == "a b"
    assert test.expect.output is not None and test.expect.output.mode == "exact"
    assert test.expect.output.value is None

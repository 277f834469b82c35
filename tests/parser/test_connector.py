"""connector.yaml: what the parser accepts, what it refuses (by code), and a fuzz test that
only ProctorError ever escapes it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from proctor.errors import ParseError
from proctor.parser.connector import connector_origin, parse_connector
from proctor.parser.yaml_strict import load_yaml
from tests.fuzzing import FUZZ, as_yaml, mutated, only_proctor_errors, spliced

CONNECTOR = """\
name: tracker
description: A tracker.
base_url: https://tracker.example.com/v1
credential: tracker
operations:
  issue.read:
    verb: read
    request: {method: GET, path: "/issues/{issue}", query: {fields: $input.fields}}
    inputs:
      type: object
      properties: {issue: {type: string}, fields: {type: string}}
      required: [issue]
    result: {title: /title, label: /label}
  issue.label:
    verb: write
    approval: required
    request: {method: POST, path: "/issues/{issue}/labels", json: {label: $input.label}}
    inputs:
      type: object
      properties: {issue: {type: string}, label: {type: string}}
      required: [issue, label]
    readback: {operation: issue.read, inputs: {issue: $input.issue}, match: {/label: $input.label}}
    cost: {usd_micro: 100, per: call}
"""
BASE = load_yaml(CONNECTOR, source="connector.yaml")


def _refused(text: str, **kwargs: Any) -> str:
    with pytest.raises(ParseError) as raised:
        parse_connector(text, "connectors/tracker/connector.yaml", **kwargs)
    return raised.value.code


def test_the_base_connector_is_valid() -> None:
    c = parse_connector(CONNECTOR, "connector.yaml", folder_name="tracker")
    assert c.operations["issue.label"].readback is not None
    assert c.operations["issue.label"].cost is not None
    assert connector_origin(c.base_url) == "https://tracker.example.com:443"


@pytest.mark.parametrize(
    ("old", "new", "code"),
    [
        ("base_url: https://tracker.example.com/v1", "base_url: http://tracker.example.com",
         "connector_base_url_invalid"),
        ("base_url: https://tracker.example.com/v1", "base_url: https://u:p@tracker.example.com",
         "connector_base_url_invalid"),
        ("base_url: https://tracker.example.com/v1", "base_url: https://t.example.com/?a=1",
         "connector_base_url_invalid"),
        ('path: "/issues/{issue}"', 'path: "/issues/{nope}"', "connector_placeholder_unknown"),
        ("json: {label: $input.label}", "json: {label: $input.other}", "reference_unknown_input"),
        ("json: {label: $input.label}", "json: {label: $steps.x.y}", "invalid_reference"),
        ("operation: issue.read", "operation: issue.gone", "readback_unknown"),
        ("operation: issue.read", "operation: issue.label", "readback_not_read"),
        ("    verb: write", "    verb: write\n    colour: red", "connector_unknown_field"),
        ("cost: {usd_micro: 100, per: call}", "cost: {usd_micro: -1, per: call}",
         "connector_invalid"),
        ("properties: {issue: {type: string}, label: {type: string}}",
         "properties: {issue: {type: string}, label: {type: string}, idempotency_key: {}}",
         "operation_input_reserved"),
        ("    verb: read", "    verb: read\n    readback: {operation: issue.read, match: {/a: 1}}",
         "connector_invalid"),
    ],
)  # fmt: skip
def test_refusals_name_what_is_wrong(old: str, new: str, code: str) -> None:
    assert old in CONNECTOR
    assert _refused(CONNECTOR.replace(old, new, 1)) == code


def test_the_name_must_match_its_folder() -> None:
    assert _refused(CONNECTOR, folder_name="other") == "connector_name_mismatch"


def test_plain_http_only_to_loopback() -> None:
    assert connector_origin("http://127.0.0.1:8080/api") == "http://127.0.0.1:8080"
    with pytest.raises(ParseError):
        connector_origin("http://10.0.0.1/")


@FUZZ
@given(mutated(BASE))
def test_connector_with_a_subtree_replaced(doc: Any) -> None:
    only_proctor_errors(lambda: parse_connector(as_yaml(doc), "c.yaml", folder_name="tracker"))


@FUZZ
@given(spliced(CONNECTOR))
def test_connector_text_spliced(text: str) -> None:
    only_proctor_errors(lambda: parse_connector(text, "c.yaml"))


MCP_CONNECTOR = """\
name: notes
description: Notes kept by an upstream MCP server.
mcp: files
operations:
  note.read:
    verb: read
    mcp: {tool: read_text_file, arguments: {path: $input.path}}
    inputs: {type: object, properties: {path: {type: string}}, required: [path]}
    result: {text: /content/0/text}
  note.write:
    verb: write
    approval: required
    mcp: {tool: write_file, arguments: {path: $input.path, content: $input.content}}
    inputs:
      type: object
      properties: {path: {type: string}, content: {type: string}}
      required: [path, content]
    readback: {operation: note.read, inputs: {path: $input.path}, match: {/text: $input.content}}
"""
MCP_BASE = load_yaml(MCP_CONNECTOR, source="connector.yaml")


def test_an_mcp_connector_is_valid_and_its_origin_names_the_server() -> None:
    from proctor.parser.connector import origin_of

    c = parse_connector(MCP_CONNECTOR, "connector.yaml", folder_name="notes")
    assert c.base_url is None and c.mcp == "files"
    write = c.operations["note.write"]
    assert write.request is None and write.mcp is not None and write.mcp.tool == "write_file"
    assert origin_of(c) == "mcp:files"


@pytest.mark.parametrize(
    ("old", "new", "code"),
    [
        # one way to the provider: both, or neither, is refused
        ("mcp: files\n", "mcp: files\nbase_url: https://a.example.com\n", "connector_invalid"),
        ("mcp: files\n", "", "connector_invalid"),
        # the credential of an MCP connector is its server's [mcp.<server>] one
        ("mcp: files\n", "mcp: files\ncredential: tracker\n", "connector_invalid"),
        # an operation fits its connector: an MCP connector's have mcp, never request
        ("    mcp: {tool: read_text_file, arguments: {path: $input.path}}",
         "    request: {method: GET, path: /x}", "connector_invalid"),
        ("    mcp: {tool: read_text_file, arguments: {path: $input.path}}",
         "    mcp: {tool: read_text_file, arguments: {path: $input.path}}\n"
         "    request: {method: GET, path: /x}", "connector_invalid"),
        ("arguments: {path: $input.path}}", "arguments: {path: $input.nope}}",
         "reference_unknown_input"),
        ("arguments: {path: $input.path}}", "arguments: {path: $steps.a.b}}",
         "invalid_reference"),
        ("tool: read_text_file", "tool: 'a b'", "connector_invalid"),
        ("mcp: files\n", "mcp: a__b\n", "connector_invalid"),
        ("mcp: {tool: read_text_file,", "mcp: {colour: red, tool: read_text_file,",
         "connector_unknown_field"),
    ],
)  # fmt: skip
def test_mcp_connector_refusals_name_what_is_wrong(old: str, new: str, code: str) -> None:
    assert old in MCP_CONNECTOR
    assert _refused(MCP_CONNECTOR.replace(old, new, 1)) == code


def test_an_http_connectors_operation_may_not_call_an_mcp_tool() -> None:
    text = CONNECTOR.replace(
        '    request: {method: GET, path: "/issues/{issue}", query: {fields: $input.fields}}',
        "    mcp: {tool: lookup}",
    )
    assert _refused(text) == "connector_invalid"


@FUZZ
@given(mutated(MCP_BASE))
def test_mcp_connector_with_a_subtree_replaced(doc: Any) -> None:
    only_proctor_errors(lambda: parse_connector(as_yaml(doc), "c.yaml", folder_name="notes"))


@FUZZ
@given(spliced(MCP_CONNECTOR))
def test_mcp_connector_text_spliced(text: str) -> None:
    only_proctor_errors(lambda: parse_connector(text, "c.yaml"))

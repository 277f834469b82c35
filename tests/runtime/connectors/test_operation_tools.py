"""Operation tools built from a manifest: request templates, provider keys, globs, pointers."""

from __future__ import annotations

from typing import Any

from proctor.contracts.values import replace
from proctor.parser.connector import connector_origin, parse_connector
from proctor.runtime.connectors.catalog import LoadedConnector
from proctor.runtime.connectors.operations import (
    expand_operations,
    operation_payload,
    operation_tools,
    pointer_get,
    provider_key,
    quote_micro_usd,
)
from tests.parser.test_connector import CONNECTOR


def _tools() -> dict[str, Any]:
    c = parse_connector(CONNECTOR, "connector.yaml")
    return dict(operation_tools({"tracker": LoadedConnector(c, connector_origin(c.base_url), "x")}))


def test_path_inputs_never_leave_their_segment_and_absent_optionals_are_not_sent() -> None:
    tools = _tools()
    read = tools["operation:tracker/issue.read"]
    shown = operation_payload(read, {"issue": "../../admin?x=1#y"})["operation"]
    assert shown["url"] == "https://tracker.example.com/v1/issues/..%2F..%2Fadmin%3Fx%3D1%23y"
    assert shown["query"] == {}  # fields was not given: not sent as null
    with_fields = operation_payload(read, {"issue": "1", "fields": "title"})["operation"]
    assert with_fields["query"] == {"fields": "title"}


def test_a_write_requires_its_key_and_its_provider_key_is_scoped() -> None:
    tools = _tools()
    label = tools["operation:tracker/issue.label"]
    assert "idempotency_key" in label.schema["required"]
    other = _tools()["operation:tracker/issue.label"]
    pkg = "local:skills/triage"
    assert provider_key(label, "k", pkg) == provider_key(other, "k", pkg)
    assert provider_key(label, "k", pkg) != provider_key(label, "k2", pkg)
    # another package, or the same connector name at another origin, is another act
    assert provider_key(label, "k", pkg) != provider_key(label, "k", "registry:evil/triage")
    moved = replace(label, origin="https://elsewhere.example.com:443")
    assert provider_key(label, "k", pkg) != provider_key(moved, "k", pkg)
    assert quote_micro_usd(label) == 100
    assert quote_micro_usd(tools["operation:tracker/issue.read"]) is None


def test_globs_offer_only_what_exists() -> None:
    tools = _tools()
    assert expand_operations(["tracker/*"], tools) == [
        "operation:tracker/issue.label",
        "operation:tracker/issue.read",
    ]
    assert expand_operations(["tracker/issue.read", "nope/*", "tracker/gone"], tools) == [
        "operation:tracker/issue.read"
    ]


def test_pointers() -> None:
    doc = {"a": [{"b/c": 1}], "~": 2}
    assert pointer_get(doc, "/a/0/b~1c") == 1
    assert pointer_get(doc, "/~0") == 2
    assert pointer_get(doc, "") == doc
    assert pointer_get(doc, "/a/5") != 1 and pointer_get(doc, "/x") is not None

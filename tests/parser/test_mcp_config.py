"""The upstream MCP configuration parsers: ``.mcp.json`` (the ``mcpServers`` client format) and
``proctor.toml``'s ``[mcp.<server>]``. Strict: each malformed shape is refused with its code;
fuzzed: nothing but a ProctorError escapes either parser."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.errors import ParseError
from proctor.parser.mcp_config import (
    CredentialSetting,
    HttpServer,
    RateLimit,
    StdioServer,
    parse_mcp_json,
    parse_mcp_settings,
)
from tests.fuzzing import FUZZ, mutated, only_proctor_errors, spliced

CONFIG: dict[str, Any] = {
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
            "env": {"LOG_LEVEL": "info"},
        },
        "tracker": {
            "type": "http",
            "url": "https://mcp.tracker.example/mcp",
            "headers": {"X-Team": "core"},
        },
    }
}
SETTINGS = """\
[mcp.tracker]
credential = {provider = "tracker", header = "Authorization", scheme = "Bearer"}
rate = {calls = 60, window_seconds = 60}
timeout_seconds = 30

[mcp.filesystem]
egress = []

[mcp.filesystem.tools.write_file]
effect = "write"
rate = {calls = 5, window_seconds = 3600}
"""


def test_a_client_configuration_reads_as_typed_servers() -> None:
    servers = parse_mcp_json(json.dumps(CONFIG))
    assert servers["filesystem"] == StdioServer(
        name="filesystem",
        command="npx",
        args=("-y", "@modelcontextprotocol/server-filesystem", "/data"),
        env=(("LOG_LEVEL", "info"),),
    )
    assert servers["tracker"] == HttpServer(
        name="tracker", url="https://mcp.tracker.example/mcp", headers=(("X-Team", "core"),)
    )


def test_proctor_settings_read_as_typed_settings() -> None:
    settings = parse_mcp_settings(tomllib.loads(SETTINGS)["mcp"])
    tracker = settings["tracker"]
    assert tracker.credential == CredentialSetting(
        provider="tracker", header="Authorization", scheme="Bearer"
    )
    assert tracker.rate == RateLimit(calls=60, window_seconds=60)
    assert tracker.timeout_seconds == 30
    write = settings["filesystem"].tools["write_file"]
    assert (write.effect, write.rate) == ("write", RateLimit(5, 3600))


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("[]", "mcp_config_invalid"),
        ("{", "mcp_config_invalid"),
        ('{"mcpServers": {}, "mcpServers": {}}', "mcp_config_invalid"),
        ('{"mcpServers": {"a": {"command": "x", "args": [NaN]}}}', "mcp_config_invalid"),
        ('{"servers": {}}', "mcp_config_unknown_field"),
        ('{"mcpServers": {"a": {"command": "x", "cwd": "/"}}}', "mcp_config_unknown_field"),
        ('{"mcpServers": {"a__b": {"command": "x"}}}', "mcp_server_name_invalid"),
        ('{"mcpServers": {"a/b": {"command": "x"}}}', "mcp_server_name_invalid"),
        ('{"mcpServers": {"a": {}}}', "mcp_server_transport_invalid"),
        (
            '{"mcpServers": {"a": {"command": "x", "url": "https://h"}}}',
            "mcp_server_transport_invalid",
        ),
        (
            '{"mcpServers": {"a": {"type": "sse", "url": "https://h/sse"}}}',
            "mcp_server_transport_invalid",
        ),
        (
            '{"mcpServers": {"a": {"type": "stdio", "url": "https://h"}}}',
            "mcp_server_transport_invalid",
        ),
        ('{"mcpServers": {"a": {"url": "http://example.com/mcp"}}}', "mcp_url_invalid"),
        ('{"mcpServers": {"a": {"url": "https://u:p@h/mcp"}}}', "mcp_url_invalid"),
        ('{"mcpServers": {"a": {"url": "file:///etc/passwd"}}}', "mcp_url_invalid"),
        ('{"mcpServers": {"a": {"command": ""}}}', "mcp_config_invalid"),
        ('{"mcpServers": {"a": {"command": "x", "env": {"A": 1}}}}', "mcp_config_invalid"),
        ('{"mcpServers": {"a": {"command": "x", "env": {"1A": "v"}}}}', "mcp_config_invalid"),
        (
            '{"mcpServers": {"a": {"url": "https://h", "headers": {"A B": "v"}}}}',
            "mcp_config_invalid",
        ),
    ],
)
def test_a_malformed_configuration_is_refused_with_its_code(text: str, code: str) -> None:
    with pytest.raises(ParseError) as refused:
        parse_mcp_json(text)
    assert refused.value.code == code


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("[mcp.a]\nretries = 3\n", "mcp_settings_unknown_field"),
        ("[mcp.a]\nrate = {calls = 0, window_seconds = 60}\n", "mcp_settings_invalid"),
        ("[mcp.a]\nrate = {calls = 5}\n", "mcp_settings_invalid"),
        (
            "[mcp.a]\nrate = {calls = 5, window_seconds = 60, burst = 2}\n",
            "mcp_settings_unknown_field",
        ),
        ('[mcp.a]\ncredential = {provider = "p"}\n', "mcp_settings_invalid"),
        (
            '[mcp.a]\ncredential = {provider = "p", env = "A", header = "B"}\n',
            "mcp_settings_invalid",
        ),
        (
            '[mcp.a]\ncredential = {provider = "p", env = "A", scheme = "Bearer"}\n',
            "mcp_settings_invalid",
        ),
        (
            '[mcp.a]\ncredential = {provider = "p", header = "A", audience = "http://h"}\n',
            "mcp_settings_invalid",
        ),
        ('[mcp.a.tools.t]\neffect = "maybe"\n', "mcp_settings_invalid"),
        ('[mcp.a.tools."t/u"]\neffect = "read"\n', "mcp_settings_invalid"),
        ('[mcp.a]\negress = "*"\n', "mcp_settings_invalid"),
        ("[mcp.a]\ntimeout_seconds = true\n", "mcp_settings_invalid"),
        ('[mcp."a__b"]\n', "mcp_server_name_invalid"),
        ("mcp = 1\n", "mcp_settings_invalid"),
    ],
)
def test_malformed_settings_are_refused_with_their_code(text: str, code: str) -> None:
    with pytest.raises(ParseError) as refused:
        parse_mcp_settings(tomllib.loads(text)["mcp"])
    assert refused.value.code == code


@FUZZ
@given(mutated(CONFIG))
def test_fuzz_a_configuration_with_a_subtree_replaced(doc: Any) -> None:
    only_proctor_errors(lambda: parse_mcp_json(json.dumps(doc)))


@FUZZ
@given(st.one_of(spliced(json.dumps(CONFIG)), st.text(max_size=200), st.binary(max_size=64)))
def test_fuzz_configuration_text(text: str | bytes) -> None:
    only_proctor_errors(lambda: parse_mcp_json(text))


@FUZZ
@given(mutated(tomllib.loads(SETTINGS)["mcp"]))
def test_fuzz_settings_with_a_subtree_replaced(doc: Any) -> None:
    only_proctor_errors(lambda: parse_mcp_settings(doc))

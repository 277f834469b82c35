"""``Mcp-Param-*`` headers of the 2026-07-28 protocol over HTTP: a skill whose input schema
declares one (``x-mcp-header``) has the header checked against the argument on every call;
a schema that declares none skips the check (the server gives the SDK no schema to walk) and
answers exactly as the check would have: whatever such headers say."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tests.mcp.conftest import API_KEY, Ws

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

PICK = """minimum_proctor: 0.1.0
methods:
  pick:
    description: Echo the region.
    inputs:
      type: object
      properties:
        region: {type: string, x-mcp-header: Region}
      required: [region]
      additionalProperties: false
    steps:
      - id: echo
        tool: echo
        inputs: {text: $input.region}
"""


def _call(url: str, tool: str, arguments: dict[str, Any], headers: dict[str, str]) -> Any:
    """One SDK client call; ``headers`` replace or add request headers on the way out."""
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    async def rewrite(request: Any) -> None:
        for name, value in headers.items():
            request.headers[name] = value

    async def go() -> Any:
        with anyio.fail_after(60):
            async with (
                httpx2.AsyncClient(
                    headers={"Authorization": f"Bearer {API_KEY}"},
                    event_hooks={"request": [rewrite]},
                    timeout=60,
                ) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                try:
                    return await client.call_tool(tool, arguments)
                except MCPError as exc:  # the server refused the request
                    return exc

    return anyio.run(go)


def test_a_declared_header_is_checked_and_an_undeclared_one_is_not(
    ws: Ws, http_server: Any
) -> None:
    from mcp.shared.exceptions import MCPError

    ws.add_example("hello-world")
    ws.add_skill("hdr", PICK)
    server = http_server("hello-world", "skills/hdr")

    # the SDK's client sends the declared header itself, equal to the argument
    done = _call(server.url, "hdr__pick", {"region": "eu"}, {})
    assert done.structured_content["outcome"] == "completed"
    refused = _call(server.url, "hdr__pick", {"region": "eu"}, {"Mcp-Param-Region": "us"})
    assert isinstance(refused, MCPError) and "Mcp-Param-Region" in refused.error.message
    # greet declares no header: one the client sends anyway is not compared with anything
    greeted = _call(
        server.url, "hello-world__greet", {"message": "hi"}, {"Mcp-Param-Message": "other"}
    )
    assert greeted.structured_content["outcome"] == "completed"
    calls = [e for e in ws.audit() if e["event"] == "mcp_request" and e.get("tool")]
    assert [e["tool"] for e in calls] == ["hdr__pick", "hello-world__greet"]


def test_the_schema_is_given_only_where_a_header_is_declared(ws: Ws) -> None:
    from proctor.mcp.catalog import load_catalog
    from proctor.mcp.server import ProctorServer
    from proctor.mcp.shared import ServerConfig
    from proctor.runtime.boundary.workspace import Workspace

    ws.add_example("hello-world")
    ws.add_skill("hdr", PICK)
    refs = ["skills/hello-world", "skills/hdr"]
    catalog = load_catalog(refs, cwd=ws.root, workspace_root=ws.root, environ=ws.env)
    config = ServerConfig(workspace=Workspace(ws.root), catalog=catalog, environ=ws.env)
    server = ProctorServer(config)
    try:
        assert server.input_schema("hello-world__greet") is None
        schema = server.input_schema("hdr__pick")
        assert schema is not None and schema["properties"]["region"]["x-mcp-header"] == "Region"
        assert server.input_schema("nothing__here") is None
    finally:
        server.close()

"""The MCP server: proctor's skills and paused runs served to any MCP client (official SDK).

Importing this package imports the ``mcp`` SDK; the CLI imports it only inside ``proctor mcp``.
"""

from __future__ import annotations

from proctor.mcp.app import open_server, serve
from proctor.mcp.catalog import Catalog, SkillTool, load_catalog, tool_name
from proctor.mcp.http import HttpSettings, check_http_settings
from proctor.mcp.server import ProctorServer
from proctor.mcp.shared import ServerConfig, summarize, token_id

__all__ = [
    "Catalog",
    "HttpSettings",
    "ProctorServer",
    "ServerConfig",
    "SkillTool",
    "check_http_settings",
    "load_catalog",
    "open_server",
    "serve",
    "summarize",
    "token_id",
    "tool_name",
]

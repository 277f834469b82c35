"""Read upstream MCP servers: the ``mcpServers`` client configuration and ``[mcp.<server>]``.

Two documents describe an upstream. The client configuration people already have (``.mcp.json``
at the workspace root, the format Claude Code, Cursor and other hosts read) says how to reach
each server: a stdio server's ``command``, ``args`` and ``env``, or a streamable HTTP server's
``url`` and ``headers``. What proctor adds lives in ``proctor.toml`` under ``[mcp.<server>]``:
the credential the server needs (delivered at the adapter only, never written in
``.mcp.json``), effect classes per tool, rate limits, the egress a stdio server is granted.

Both parsers are strict: an unknown field, a wrong type, a duplicate key, a server name that
cannot be a tool name, a URL with credentials in it, a rate of zero, each is refused with a
code and the path of the offending field. Nothing here reads a file or starts anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from proctor.contracts.values import dataclass, field
from proctor.errors import ParseError

__all__ = [
    "EFFECT_RANK",
    "MCP_JSON",
    "CredentialSetting",
    "HttpServer",
    "RateLimit",
    "StdioServer",
    "ToolSetting",
    "UpstreamServer",
    "UpstreamSettings",
    "parse_mcp_json",
    "parse_mcp_settings",
]

MCP_JSON = ".mcp.json"
"""The client configuration's file name at the workspace root."""

Effect = Literal["none", "read", "write", "network", "process"]
EFFECT_RANK: dict[str, int] = {"none": 0, "read": 1, "write": 2, "network": 3, "process": 4}
"""How strict each effect class is: an override may only keep or raise a tool's rank."""

# A server name becomes part of ``mcp:<server>/<tool>`` and ``<server>__<tool>``: no slash, no
# double underscore (the gateway's separator), nothing a shell or a terminal could misread.
_SERVER = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,62}$")
_TOOL = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_HEADER = re.compile(r"^[A-Za-z0-9-]{1,64}$")
_MAX_TEXT = 4096
_MAX_ITEMS = 256
_HTTP_TYPES = frozenset({"http", "streamable-http", "streamableHttp"})


@dataclass(frozen=True)
class StdioServer:
    """A server proctor starts and talks to over its standard input and output.

    Attributes:
        name: the key in ``mcpServers``.
        command: the program (looked up on the ``PATH`` the server's environment gives).
        args: its arguments.
        env: the whole environment the server gets besides ``PATH`` and its credential.
    """

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class HttpServer:
    """A server reached over streamable HTTP.

    Attributes:
        name: the key in ``mcpServers``.
        url: the endpoint (``https``, or ``http`` to a loopback host).
        headers: extra request headers (never a credential: that comes from ``[mcp.<server>]``).
    """

    name: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()


UpstreamServer = StdioServer | HttpServer


@dataclass(frozen=True)
class RateLimit:
    """At most ``calls`` calls in any ``window_seconds`` seconds."""

    calls: int
    window_seconds: int


@dataclass(frozen=True)
class CredentialSetting:
    """The credential an upstream needs and where it is delivered.

    Attributes:
        provider: the credential's provider (what ``proctor credential add`` names).
        env: the environment variable a stdio server reads it from.
        header: the request header an HTTP server reads it from.
        scheme: text put before the secret in the header (``Bearer``), or none.
        audience: the origin the credential is bound to (an HTTP server's own by default).
    """

    provider: str
    env: str | None = None
    header: str | None = None
    scheme: str | None = None
    audience: str | None = None


@dataclass(frozen=True)
class ToolSetting:
    """What ``[mcp.<server>.tools.<tool>]`` says about one tool."""

    effect: Effect | None = None
    rate: RateLimit | None = None


@dataclass(frozen=True)
class UpstreamSettings:
    """What ``proctor.toml`` adds to one upstream (all optional: the defaults are strict).

    Attributes:
        credential: the credential it needs, if any.
        egress: hosts or networks a stdio server may reach (none by default: no network).
        rate: the server's rate limit over all its tools.
        tools: per tool settings.
        timeout_seconds: how long one call may take.
    """

    credential: CredentialSetting | None = None
    egress: tuple[str, ...] = ()
    rate: RateLimit | None = None
    tools: Mapping[str, ToolSetting] = field(default_factory=dict)
    timeout_seconds: int = 60


def _fail(where: str, message: str, code: str, source: str) -> ParseError:
    return ParseError(f"{where}: {message}", file=source, code=code)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _text(value: Any, where: str, source: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise _fail(where, "must be a string", "mcp_config_invalid", source)
    if (not value and not empty) or len(value) > _MAX_TEXT or "\x00" in value:
        raise _fail(
            where,
            "must be a non-empty string of at most 4096 characters",
            "mcp_config_invalid",
            source,
        )
    return value


def _string_map(
    value: Any, where: str, source: str, key_pattern: re.Pattern[str], what: str
) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        raise _fail(where, "must be an object of strings", "mcp_config_invalid", source)
    if len(value) > _MAX_ITEMS:
        raise _fail(where, f"has more than {_MAX_ITEMS} entries", "mcp_config_invalid", source)
    out = []
    for key, item in value.items():
        if not key_pattern.match(key):
            raise _fail(
                f"{where}.{key}", f"is not a valid {what} name", "mcp_config_invalid", source
            )
        out.append((key, _text(item, f"{where}.{key}", source, empty=True)))
    return tuple(sorted(out))


def _check_url(url: str, where: str, source: str, code: str) -> None:
    try:
        parts = urlsplit(url)
        hostname, _port = parts.hostname, parts.port
    except ValueError:
        raise _fail(where, "is not a valid URL", code, source) from None
    loopback = hostname in ("127.0.0.1", "localhost", "::1")
    if (
        parts.scheme not in ("https", "http")
        or (parts.scheme == "http" and not loopback)
        or not hostname
        or parts.username is not None
        or parts.password is not None
        or parts.fragment
    ):
        raise _fail(
            where,
            "must be an https URL (http only to a loopback host) with no user, password or"
            " fragment",
            code,
            source,
        )


def _server(name: str, value: Any, source: str) -> UpstreamServer:
    where = f"mcpServers.{name}"
    if not _SERVER.match(name):
        raise _fail(
            where,
            "a server name is 1-63 letters, digits, '-' or single '_' (it becomes part of"
            " tool names)",
            "mcp_server_name_invalid",
            source,
        )
    if not isinstance(value, dict):
        raise _fail(where, "must be an object", "mcp_config_invalid", source)
    kind = value.get("type")
    if kind is not None and (
        not isinstance(kind, str) or (kind != "stdio" and kind not in _HTTP_TYPES)
    ):
        raise _fail(
            f"{where}.type",
            "must be 'stdio' or 'http' (SSE servers are not supported)",
            "mcp_server_transport_invalid",
            source,
        )
    stdio = "command" in value
    http = "url" in value
    if stdio == http or (kind == "stdio" and not stdio) or (kind in _HTTP_TYPES and not http):
        raise _fail(
            where,
            "needs either 'command' (a stdio server) or 'url' (a streamable HTTP server)",
            "mcp_server_transport_invalid",
            source,
        )
    allowed = {"type", "command", "args", "env"} if stdio else {"type", "url", "headers"}
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _fail(
            f"{where}.{unknown[0]}",
            "is not a field of a " + ("stdio" if stdio else "HTTP") + " server",
            "mcp_config_unknown_field",
            source,
        )
    if stdio:
        command = _text(value["command"], f"{where}.command", source)
        args = value.get("args", [])
        if not isinstance(args, list) or len(args) > _MAX_ITEMS:
            raise _fail(f"{where}.args", "must be a list of strings", "mcp_config_invalid", source)
        texts = tuple(
            _text(a, f"{where}.args[{i}]", source, empty=True) for i, a in enumerate(args)
        )
        env = _string_map(value.get("env", {}), f"{where}.env", source, _ENV_NAME, "variable")
        return StdioServer(name=name, command=command, args=texts, env=env)
    url = _text(value["url"], f"{where}.url", source)
    _check_url(url, f"{where}.url", source, "mcp_url_invalid")
    headers = _string_map(value.get("headers", {}), f"{where}.headers", source, _HEADER, "header")
    return HttpServer(name=name, url=url, headers=headers)


def parse_mcp_json(text: str | bytes, source: str = MCP_JSON) -> dict[str, UpstreamServer]:
    """Read a client configuration: ``{"mcpServers": {name: server, ...}}``.

    Raises:
        ParseError: ``mcp_config_invalid`` (not JSON, a duplicate key, a wrong type, too
            large), ``mcp_config_unknown_field``, ``mcp_server_name_invalid``,
            ``mcp_server_transport_invalid`` (neither or both of ``command`` and ``url``, or
            an SSE server), ``mcp_url_invalid``.
    """
    if len(text) > 1024 * 1024:
        raise _fail("$", "is larger than 1 MiB", "mcp_config_invalid", source)
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise _fail(
            "$", f"is not valid JSON ({str(exc)[:200]})", "mcp_config_invalid", source
        ) from None
    if not isinstance(data, dict):
        raise _fail("$", "must be an object with 'mcpServers'", "mcp_config_invalid", source)
    unknown = sorted(set(data) - {"mcpServers"})
    if unknown:
        raise _fail(
            unknown[0],
            "is not a field of the configuration (only 'mcpServers')",
            "mcp_config_unknown_field",
            source,
        )
    servers = data.get("mcpServers")
    if not isinstance(servers, dict):
        raise _fail("mcpServers", "must be an object of servers", "mcp_config_invalid", source)
    if len(servers) > _MAX_ITEMS:
        raise _fail(
            "mcpServers", f"has more than {_MAX_ITEMS} servers", "mcp_config_invalid", source
        )
    return {name: _server(name, value, source) for name, value in sorted(servers.items())}


def _settings_fail(where: str, message: str, code: str = "mcp_settings_invalid") -> ParseError:
    return ParseError(f"{where}: {message}", file="proctor.toml", code=code)


def _only(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise _settings_fail(
            f"{where}.{unknown[0]}", "is not a known setting", "mcp_settings_unknown_field"
        )


def _positive(value: Any, where: str, most: int) -> int:
    if type(value) is not int or not 1 <= value <= most:
        raise _settings_fail(where, f"must be a whole number from 1 to {most}")
    return value


def _rate(value: Any, where: str) -> RateLimit:
    if not isinstance(value, dict):
        raise _settings_fail(where, "must be a table {calls = N, window_seconds = S}")
    _only(value, {"calls", "window_seconds"}, where)
    if "calls" not in value or "window_seconds" not in value:
        raise _settings_fail(where, "needs both 'calls' and 'window_seconds'")
    return RateLimit(
        calls=_positive(value["calls"], f"{where}.calls", 1_000_000),
        window_seconds=_positive(value["window_seconds"], f"{where}.window_seconds", 31 * 86400),
    )


def _name(value: Any, where: str, pattern: re.Pattern[str]) -> str:
    if not isinstance(value, str) or not pattern.match(value):
        raise _settings_fail(where, "is not a valid name")
    return value


def _credential(value: Any, where: str) -> CredentialSetting:
    if not isinstance(value, dict):
        raise _settings_fail(where, "must be a table {provider = ..., env = ... | header = ...}")
    _only(value, {"provider", "env", "header", "scheme", "audience"}, where)
    provider = value.get("provider")
    if not isinstance(provider, str) or not 1 <= len(provider) <= 128:
        raise _settings_fail(f"{where}.provider", "must name the credential's provider")
    env = None if "env" not in value else _name(value["env"], f"{where}.env", _ENV_NAME)
    header = None if "header" not in value else _name(value["header"], f"{where}.header", _HEADER)
    if (env is None) == (header is None):
        raise _settings_fail(
            where,
            "delivers the credential as one 'env' (a stdio server) or"
            " one 'header' (an HTTP server)",
        )
    scheme = value.get("scheme")
    if scheme is not None and (
        header is None or not isinstance(scheme, str) or not re.match(r"^[A-Za-z-]{1,32}$", scheme)
    ):
        raise _settings_fail(f"{where}.scheme", "is a word such as 'Bearer', for a header only")
    audience = value.get("audience")
    if audience is not None:
        if not isinstance(audience, str):
            raise _settings_fail(f"{where}.audience", "must be an https origin")
        _check_url(audience, f"{where}.audience", "proctor.toml", "mcp_settings_invalid")
    return CredentialSetting(
        provider=provider, env=env, header=header, scheme=scheme, audience=audience
    )


def _tool(value: Any, where: str) -> ToolSetting:
    if not isinstance(value, dict):
        raise _settings_fail(where, "must be a table")
    _only(value, {"effect", "rate"}, where)
    effect = value.get("effect")
    if effect is not None and (not isinstance(effect, str) or effect not in EFFECT_RANK):
        raise _settings_fail(f"{where}.effect", "must be none, read, write, network or process")
    rate = None if "rate" not in value else _rate(value["rate"], f"{where}.rate")
    return ToolSetting(effect=effect, rate=rate)  # type: ignore[arg-type]  # checked above


def parse_mcp_settings(table: Any) -> dict[str, UpstreamSettings]:
    """Read ``proctor.toml``'s ``[mcp]`` table: ``[mcp.<server>]`` per upstream.

    Raises:
        ParseError: ``mcp_settings_invalid`` (a wrong type or value: a rate of zero, an
            unknown effect class, a credential with neither or both deliveries),
            ``mcp_settings_unknown_field``.
    """
    if not isinstance(table, dict):
        raise _settings_fail("mcp", "must be a table of [mcp.<server>] tables")
    out: dict[str, UpstreamSettings] = {}
    for server, value in sorted(table.items()):
        where = f"mcp.{server}"
        if not _SERVER.match(server):
            raise _settings_fail(where, "is not a valid server name", "mcp_server_name_invalid")
        if not isinstance(value, dict):
            raise _settings_fail(where, "must be a table")
        _only(value, {"credential", "egress", "rate", "tools", "timeout_seconds"}, where)
        egress = value.get("egress", [])
        if (
            not isinstance(egress, list)
            or len(egress) > _MAX_ITEMS
            or not all(isinstance(e, str) and 0 < len(e) <= 253 for e in egress)
        ):
            raise _settings_fail(f"{where}.egress", "must be a list of hosts or networks")
        tools = value.get("tools", {})
        if not isinstance(tools, dict) or len(tools) > 4 * _MAX_ITEMS:
            raise _settings_fail(f"{where}.tools", "must be a table of [..tools.<tool>] tables")
        for tool in tools:
            if not _TOOL.match(tool):
                raise _settings_fail(f"{where}.tools.{tool}", "is not a valid tool name")
        out[server] = UpstreamSettings(
            credential=None
            if "credential" not in value
            else _credential(value["credential"], f"{where}.credential"),
            egress=tuple(egress),
            rate=None if "rate" not in value else _rate(value["rate"], f"{where}.rate"),
            tools={t: _tool(v, f"{where}.tools.{t}") for t, v in sorted(tools.items())},
            timeout_seconds=_positive(
                value.get("timeout_seconds", 60), f"{where}.timeout_seconds", 3600
            ),
        )
    return out

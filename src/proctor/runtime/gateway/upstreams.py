"""A workspace's upstream MCP servers as governed tools ``mcp:<server>/<tool>``.

:func:`load_upstreams` joins the client configuration (``.mcp.json``, or the file
``PROCTOR_MCP_CONFIG`` / ``--config`` names) with ``proctor.toml``'s ``[mcp.<server>]`` tables.
:class:`Upstreams` holds the connections of one process (a server is started on its first call
and kept for the process's life) and builds one :class:`UpstreamTool` per pinned definition.

A tool's handler runs after admission (scope, schema, containment, policy, the floor with the
exact arguments, budgets) and, in this order: counts the call against its rate limits
(``rate_limited``: nothing sent, the server not even started); compares the server's live
definition with the pin (``tool_definition_changed``: the call is not sent); sends the call.
The description a model reads is labelled as untrusted upstream text.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.contracts.values import dataclass, field
from proctor.errors import ConfigError, ParseError, ProctorError, RefusedCall, ToolFailed
from proctor.parser.mcp_config import (
    EFFECT_RANK,
    MCP_JSON,
    HttpServer,
    StdioServer,
    UpstreamServer,
    UpstreamSettings,
    parse_mcp_json,
    parse_mcp_settings,
)
from proctor.runtime.gateway.pins import Pins, definition_digest, definition_of
from proctor.runtime.tools.base import Effect, Tool, ToolContext

if TYPE_CHECKING:
    from proctor.runtime.boundary.workspace import Workspace
    from proctor.runtime.gateway.wire import Wire

__all__ = [
    "CONFIG_ENV",
    "MCP_PREFIX",
    "StandIn",
    "UpstreamConfig",
    "UpstreamTool",
    "Upstreams",
    "effect_for",
    "load_upstreams",
    "shared_upstreams",
    "unavailable_tools",
    "upstream_tool_name",
    "workspace_tools",
]

MCP_PREFIX = "mcp:"
CONFIG_ENV = "PROCTOR_MCP_CONFIG"
"""Names the client configuration file instead of ``<workspace>/.mcp.json``."""

StandIn = Callable[[str, str, Mapping[str, Any]], dict[str, Any]]
"""Answers ``(server, tool, arguments)`` with a ``CallToolResult`` document, or refuses."""

UNTRUSTED_LABEL = "[untrusted text from upstream MCP server '{server}']"


def upstream_tool_name(server: str, tool: str) -> str:
    """``mcp:<server>/<tool>``."""
    return f"{MCP_PREFIX}{server}/{tool}"


@dataclass(frozen=True)
class UpstreamConfig:
    """The upstreams of a workspace: how to reach each, and what proctor adds."""

    servers: Mapping[str, UpstreamServer]
    settings: Mapping[str, UpstreamSettings]
    source: str = MCP_JSON

    def settings_of(self, server: str) -> UpstreamSettings:
        """The server's ``[mcp.<server>]`` settings (the strict defaults when it has none)."""
        return self.settings.get(server) or UpstreamSettings()


def load_upstreams(
    root: Path, environ: Mapping[str, str], config: Path | None = None
) -> UpstreamConfig | None:
    """Read the workspace's upstream configuration; ``None`` when it has none.

    Raises:
        ParseError: as :func:`proctor.parser.mcp_config.parse_mcp_json` and
            :func:`~proctor.parser.mcp_config.parse_mcp_settings`;
            ``mcp_settings_unknown_server`` (``[mcp.X]`` for a server the configuration
            lacks); ``mcp_config_missing`` (a configuration named that does not exist).
    """
    named = config or (Path(environ[CONFIG_ENV]) if environ.get(CONFIG_ENV) else None)
    path = named if named is not None else root / MCP_JSON
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        if named is not None:
            raise ParseError(
                "the MCP configuration named does not exist",
                file=str(path.name),
                code="mcp_config_missing",
            ) from None
        return None
    except OSError as exc:
        raise ParseError(
            f"cannot read it: {exc.strerror}", file=path.name, code="mcp_config_invalid"
        ) from exc
    servers = parse_mcp_json(text, path.name)
    settings: dict[str, UpstreamSettings] = {}
    toml = root / "proctor.toml"
    if toml.is_file():
        import tomllib

        try:
            document = tomllib.loads(toml.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"proctor.toml is not valid TOML: {exc}") from exc
        if "mcp" in document:
            settings = parse_mcp_settings(document["mcp"])
    for name in settings:
        if name not in servers:
            raise ParseError(
                f"mcp.{name}: no server of that name in {path.name}",
                file="proctor.toml",
                code="mcp_settings_unknown_server",
            )
    return UpstreamConfig(servers=servers, settings=settings, source=path.name)


def effect_for(
    definition: Mapping[str, Any], override: str | None, where: str, *, remote: bool = False
) -> Effect:
    """A tool's effect class: ``read`` when its annotations say ``readOnlyHint``, else
    ``write`` (an unannotated tool counts as a write), or ``network`` for a ``remote`` (HTTP)
    server's, whose effects happen beyond this host; an override may only be as strict or
    stricter.

    Raises:
        ParseError: ``mcp_effect_weaker``: the override is less strict than the annotation.
    """
    annotations = definition.get("annotations")
    read_only = isinstance(annotations, Mapping) and annotations.get("readOnlyHint") is True
    base: Effect = "read" if read_only else "network" if remote else "write"
    if override is None:
        return base
    if EFFECT_RANK[override] < EFFECT_RANK[base]:
        raise ParseError(
            f"{where}.effect: {override!r} is less strict than the tool's annotations say"
            f" ({base!r}); an override may only make a tool stricter",
            file="proctor.toml",
            code="mcp_effect_weaker",
        )
    return override  # type: ignore[return-value]


def _object_schema(definition: Mapping[str, Any]) -> dict[str, Any]:
    schema = definition.get("inputSchema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return {"type": "object", "additionalProperties": False, "properties": {}}
    out = dict(schema)
    out.pop("$schema", None)  # fastjsonschema reads draft-07 and later alike
    return out


@dataclass(frozen=True)
class UpstreamTool(Tool):
    """An upstream MCP tool as a proctor tool.

    Attributes:
        server / upstream_name: the server's name in the configuration and the tool's own.
        definition: the pinned definition (name, description, schemas, annotations).
        digest: the pinned definition's digest.
    """

    server: str = ""
    upstream_name: str = ""
    definition: Mapping[str, Any] = field(default_factory=dict)
    digest: str = ""


class Upstreams:
    """The upstreams of one workspace in this process: connections (opened on first use) and
    live definitions (listed once per connection)."""

    def __init__(
        self,
        config: UpstreamConfig,
        workspace: Workspace,
        environ: Mapping[str, str],
        *,
        pins_root: Path | None = None,
        answer: StandIn | None = None,
    ) -> None:
        self.config = config
        self.workspace = workspace
        self.environ = dict(environ)
        self.pins = Pins(pins_root or workspace.root)
        # a test's providers.mcp: answers every call; no server is ever started
        self.answer = answer
        self._wires: dict[str, Wire] = {}
        self._live: dict[str, dict[str, dict[str, Any]]] = {}
        self._digests: dict[str, dict[str, str]] = {}
        # the credentials delivered to the servers: scrubbed from every answer they give
        self._delivered: set[str] = set()
        self._secrets: dict[str, str] = {}
        self._schemas: dict[tuple[str, str], tuple[Mapping[str, Any], dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.sandboxes: dict[str, Any] = {}
        atexit.register(self.close)

    # -- connections -------------------------------------------------------------------------

    def wire(self, server: str) -> Wire:
        """The connection to ``server``, started on first use.

        Raises:
            RefusedCall: the sandbox it must run in is unavailable; ``needs_credential``.
            ToolFailed: ``mcp_upstream_not_started``, ``mcp_upstream_failed``.
        """
        with self._lock:
            found = self._wires.get(server)
            if found is not None:
                return found
            spec = self.config.servers[server]
            settings = self.config.settings_of(server)
            secret = self._secret(server)
            if isinstance(spec, StdioServer):
                from proctor.runtime.gateway.launch import open_stdio

                self.pins.ensure()
                env_secret = None
                if secret is not None and settings.credential is not None:
                    env_secret = (settings.credential.env or "", secret)
                wire: Wire
                wire, use = open_stdio(
                    spec,
                    settings,
                    workspace=self.workspace,
                    environ=self.environ,
                    secret=env_secret,
                )
                self.sandboxes[server] = use
            else:
                from proctor.runtime.gateway.launch import open_http

                header = None
                if secret is not None and settings.credential is not None:
                    scheme = settings.credential.scheme
                    header = (
                        settings.credential.header or "Authorization",
                        f"{scheme} {secret}" if scheme else secret,
                    )
                wire = open_http(spec, settings, workspace_root=self.workspace.root, header=header)
            self._wires[server] = wire
            return wire

    def credential(self, server: str, environ: Mapping[str, str] | None = None) -> str | None:
        """The material of ``server``'s ``[mcp.<server>] credential`` (``None`` when it names
        none), resolved again from ``environ`` (a run's, when it is prepared, as an HTTP
        connector's credential is for each run), and kept for its adapter alone (a server
        started later gets it; one already running keeps what it was started with).

        Raises:
            CredentialError: ``needs_credential`` (details ``readiness``) and the resolver's
                other codes; nothing is kept.
        """
        self._secrets.pop(server, None)
        return self._secret(server, environ)

    def _secret(self, server: str, environ: Mapping[str, str] | None = None) -> str | None:
        """The credential's material, resolved as any run's requirement is (profiles,
        bindings, the environment), for the adapter alone."""
        known = self._secrets.get(server)
        if known is not None:
            return known
        spec = self.config.servers[server]
        cred = self.config.settings_of(server).credential
        if cred is None:
            return None
        from proctor.contracts.skill import (
            CredentialAuth,
            CredentialDelivery,
            CredentialRequirement,
        )
        from proctor.runtime.home.credentials import (
            CredentialStore,
            resolve_credentials,
            snapshot_environment,
        )

        env = self.environ if environ is None else environ
        audience = cred.audience
        if audience is None and isinstance(spec, HttpServer):
            from urllib.parse import urlsplit

            parts = urlsplit(spec.url)
            if parts.scheme == "https":  # an audience is an https origin (loopback http has none)
                audience = f"https://{parts.netloc}"
        env_name = cred.env or f"MCP_{spec.name.upper().replace('-', '_')}_CREDENTIAL"
        requirement = CredentialRequirement(
            provider=cred.provider,
            audience=audience,
            auth={"api_key": CredentialAuth(delivery=CredentialDelivery(env=env_name))},
        )
        home = env.get("PROCTOR_HOME")  # the profile store a run's delivery reads
        backend = env.get("PROCTOR_SECRET_BACKEND", "").strip().lower() or None
        resolved = resolve_credentials(
            {spec.name: requirement},
            skill=f"mcp:{spec.name}",
            workspace_root=self.workspace.root,
            env=snapshot_environment(self.workspace.root, env),
            store=CredentialStore(Path(home) if home else None, backend=backend),
        )
        secret = resolved[spec.name].secret.reveal()
        self._delivered.add(secret)
        self._secrets[server] = secret
        return secret

    def close(self) -> None:
        """End every connection (a stdio server's whole process tree)."""
        with self._lock:
            wires, self._wires = self._wires, {}
            self._live.clear()
            self._digests.clear()
        for wire in wires.values():
            # one server failing to end must not keep the others running
            with contextlib.suppress(Exception):
                wire.close()

    # -- definitions -------------------------------------------------------------------------

    def live(self, server: str) -> dict[str, dict[str, Any]]:
        """The server's tools as it lists them now (once per connection), by name.

        Raises:
            as :meth:`wire`.
        """
        known = self._live.get(server)
        if known is None:
            listed = self.wire(server).list_tools()
            known = {
                str(t["name"]): definition_of(t) for t in listed if isinstance(t.get("name"), str)
            }
            self._live[server] = known
        return known

    def live_digests(self, server: str) -> dict[str, str]:
        """The digest of each live definition of ``server`` (once per connection)."""
        known = self._digests.get(server)
        if known is None:
            known = {name: definition_digest(d) for name, d in self.live(server).items()}
            self._digests[server] = known
        return known

    def pin_new(self, server: str) -> list[str]:
        """Pin each live tool of ``server`` not pinned yet (first use); the tools pinned."""
        return self.pins.pin(server, self.live(server))

    def tools(self) -> dict[str, UpstreamTool]:
        """One tool per pinned definition of a configured server (nothing is started).

        Raises:
            ConfigError: ``mcp_lock_invalid``.
            ParseError: ``mcp_effect_weaker``.
        """
        out: dict[str, UpstreamTool] = {}
        pinned = self.pins.read()
        for server in self.config.servers:
            settings = self.config.settings_of(server)
            for name, definition in sorted(pinned.get(server, {}).items()):
                setting = settings.tools.get(name)
                effect = effect_for(
                    definition,
                    None if setting is None else setting.effect,
                    f"mcp.{server}.tools.{name}",
                    remote=isinstance(self.config.servers[server], HttpServer),
                )
                full = upstream_tool_name(server, name)
                text = str(definition.get("description") or "")
                out[full] = UpstreamTool(
                    name=full,
                    description=f"{UNTRUSTED_LABEL.format(server=server)} {text}".strip(),
                    schema=_object_schema(definition),
                    effect=effect,
                    handler=self._handler(server, name),
                    output_schema=definition.get("outputSchema"),
                    server=server,
                    upstream_name=name,
                    definition=definition,
                    digest=definition_digest(definition),
                )
        return out

    def pinned(self, server: str, name: str) -> Mapping[str, Any]:
        """The pinned definition of ``server``'s tool ``name``.

        Raises:
            RefusedCall: ``tool_unpinned``.
            ConfigError: ``mcp_lock_invalid``.
        """
        definition = self.pins.read().get(server, {}).get(name)
        if definition is None:
            raise RefusedCall(
                f"upstream tool {server}/{name} is not pinned; run `proctor mcp pin {server}`",
                code="tool_unpinned",
                details={"server": server, "tool": name},
            )
        return definition

    def input_schema(self, server: str, name: str) -> dict[str, Any]:
        """The pinned ``inputSchema`` of ``server``'s tool ``name``, as its tool's schema
        (what admission checks a call's arguments against, before anything is asked).

        Raises:
            as :meth:`pinned`.
        """
        definition = self.pinned(server, name)
        known = self._schemas.get((server, name))
        if known is None or known[0] is not definition:  # the same schema object: compiled once
            known = self._schemas[(server, name)] = (definition, _object_schema(definition))
        return known[1]

    def effect_of(self, server: str, name: str) -> Effect:
        """The effect class of ``server``'s pinned tool ``name`` (its annotations and
        ``[mcp.<server>]`` settings, as :meth:`tools` gives it).

        Raises:
            RefusedCall: ``tool_unpinned``.
            ConfigError: ``mcp_lock_invalid``.
            ParseError: ``mcp_effect_weaker`` (an override weaker than the annotations).
        """
        setting = self.config.settings_of(server).tools.get(name)
        return effect_for(
            self.pinned(server, name),
            None if setting is None else setting.effect,
            f"mcp.{server}.tools.{name}",
            remote=isinstance(self.config.servers[server], HttpServer),
        )

    def check_definition(self, server: str, name: str) -> None:
        """Refuse a tool whose live definition differs from its pin.

        Raises:
            RefusedCall: ``tool_definition_changed`` (details: both digests and the command
                that shows the difference); ``tool_unpinned``.
        """
        pinned = self.pins.pinned_digest(server, name)
        if pinned is None:
            raise RefusedCall(
                f"upstream tool {server}/{name} is not pinned; run `proctor mcp pin {server}`",
                code="tool_unpinned",
            )
        now = self.live_digests(server).get(name)
        if now is None or now != pinned:
            raise RefusedCall(
                f"upstream MCP server '{server}' changed the definition of tool '{name}' since"
                f" it was pinned; nothing was sent. A person reviews the change with `proctor"
                f" mcp diff {server}/{name}` and approves it with `proctor mcp approve`",
                code="tool_definition_changed",
                details={
                    "server": server,
                    "tool": name,
                    "pinned_digest": pinned,
                    "upstream_digest": now,
                },
            )

    def rate_limits(self, server: str, name: str) -> list[tuple[str, int, int]]:
        """The ``(key, calls, window_seconds)`` limits a call of ``server``'s ``name`` counts
        against."""
        settings = self.config.settings_of(server)
        limits = []
        if settings.rate is not None:
            limits.append((f"mcp:{server}", settings.rate.calls, settings.rate.window_seconds))
        tool = settings.tools.get(name)
        if tool is not None and tool.rate is not None:
            limits.append(
                (upstream_tool_name(server, name), tool.rate.calls, tool.rate.window_seconds)
            )
        return limits

    def _handler(self, server: str, name: str) -> Any:
        def handler(_ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
            return self.call(server, name, args)

        return handler

    def call(self, server: str, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Count, check and send one admitted call (see the module docstring).

        Raises:
            RefusedCall: ``rate_limited``, ``tool_definition_changed``, ``tool_unpinned``.
            ToolFailed: ``mcp_tool_error`` (the tool answered ``isError``), the wire's errors.
        """
        from proctor.runtime.gateway.rate import RateWindows

        RateWindows(self.workspace.state_dir).take(self.rate_limits(server, name))
        if self.answer is not None:
            result = self.answer(server, name, args)
        else:
            self.check_definition(server, name)
            result = self.wire(server).call_tool(name, args)
        if self._delivered:
            result = _scrubbed(result, tuple(self._delivered))
        content = result.get("content")
        content = content if isinstance(content, list) else []
        if result.get("isError") is True:
            texts = [str(c.get("text")) for c in content if isinstance(c, dict) and "text" in c]
            raise ToolFailed(
                f"upstream tool {server}/{name} failed: {' '.join(texts)[:2000]}",
                code="mcp_tool_error",
            )
        out: dict[str, Any] = {"content": content}
        if isinstance(result.get("structuredContent"), dict):
            out["structured_content"] = result["structuredContent"]
        return out


def _scrubbed(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` with every delivered secret replaced, wherever a server echoed it."""
    if isinstance(value, str):
        for secret in secrets:
            if secret and secret in value:
                value = value.replace(secret, "[REDACTED:mcp-credential]")
        return value
    if isinstance(value, list):
        return [_scrubbed(v, secrets) for v in value]
    if isinstance(value, dict):
        return {_scrubbed(k, secrets): _scrubbed(v, secrets) for k, v in value.items()}
    return value


_SHARED: dict[tuple[str, str], Upstreams] = {}
_SHARED_LOCK = threading.Lock()


def shared_upstreams(workspace: Workspace, environ: Mapping[str, str]) -> Upstreams | None:
    """This process's :class:`Upstreams` of ``workspace`` (one per workspace and
    configuration), or ``None`` when the workspace configures no upstream.

    Raises:
        ParseError, ConfigError: as :func:`load_upstreams`.
    """
    from proctor.runtime.gateway.standing import standing_for

    standing = standing_for(workspace.root)
    if standing is not None:
        return standing  # type: ignore[no-any-return]
    config = load_upstreams(workspace.root, environ)
    if config is None:
        return None
    key = (str(workspace.root), repr(config))
    with _SHARED_LOCK:
        found = _SHARED.get(key)
        if found is None:
            found = _SHARED[key] = Upstreams(config, workspace, environ)
        return found


def workspace_tools(workspace: Workspace, environ: Mapping[str, str]) -> dict[str, Tool]:
    """The upstream tools of a run in ``workspace``: one per pinned definition.

    A configuration that does not load (a malformed ``.mcp.json``, a bad ``[mcp.<server>]``
    table, a lock proctor did not write) takes away the upstream tools alone, never the run:
    each pinned tool (when the lock can be read) is then a tool whose every call is refused
    with the configuration's own code and message (``mcp_config_invalid`` ...), before
    anything is asked or sent; every other tool of the run is untouched.
    """
    try:
        upstreams = shared_upstreams(workspace, environ)
        return {} if upstreams is None else dict(upstreams.tools())
    except ProctorError as exc:
        problem = exc
    try:
        pinned = Pins(workspace.root).read()
    except ProctorError:
        pinned = {}
    return {
        (full := upstream_tool_name(server, name)): _unavailable(full, problem)
        for server, tools in sorted(pinned.items())
        for name in sorted(tools)
    }


def unavailable_tools(
    workspace: Workspace, environ: Mapping[str, str], names: Iterable[str]
) -> dict[str, Tool]:
    """For the ``mcp:`` tools among ``names`` (tools a run names that its table lacks): when
    the workspace's upstream configuration or its lock cannot be read (so no pinned tool is
    known), a tool for each that refuses every call with that problem's code
    (``mcp_lock_invalid`` ...) before anything is asked or sent; otherwise nothing (the tool
    is simply not pinned, and a call is refused ``tool_unknown``).
    """
    wanted = sorted({n for n in names if n.startswith(MCP_PREFIX)})
    if not wanted:
        return {}
    try:
        upstreams = shared_upstreams(workspace, environ)
        (Pins(workspace.root) if upstreams is None else upstreams.pins).read()
    except ProctorError as exc:
        return {name: _unavailable(name, exc) for name in wanted}
    return {}


def _unavailable(name: str, problem: ProctorError) -> Tool:
    message = (
        "upstream MCP tools are unavailable until their configuration is fixed:"
        f" {problem.message}; nothing was sent"
    )

    def refuse(_ctx: ToolContext, _args: dict[str, Any]) -> dict[str, Any]:
        raise RefusedCall(message, code=problem.code, details={"tool": name})

    # effect none: the floor never asks a person to approve a call that cannot be sent
    return Tool(
        name=name,
        description=f"unavailable: {message}",
        schema={"type": "object"},
        effect="none",
        handler=refuse,
    )

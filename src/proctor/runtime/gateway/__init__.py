"""Upstream MCP servers as governed tools ``mcp:<server>/<tool>`` (``docs/gateway.md``).

Owns reading a workspace's upstreams (:mod:`.upstreams`: ``.mcp.json`` joined with
``proctor.toml``'s ``[mcp.<server>]``), reaching them (:mod:`.launch`: a stdio server in the
sandbox, an HTTP one through the egress guard; :mod:`.wire`: the JSON-RPC they speak), the pins
of their tool definitions (:mod:`.pins`, ``proctor-mcp.lock``) and their rate limits
(:mod:`.rate`). Admission stays the governor's: an upstream tool is an
:class:`~.upstreams.UpstreamTool` whose handler runs only after every check.

Surface: ``upstreams`` (``Upstreams``, ``UpstreamTool``, ``load_upstreams``,
``shared_upstreams``, ``MCP_PREFIX``), ``pins`` (``Pins``, ``diff_lines``,
``definition_digest``). May import tools, home, boundary and the shared runtime modules; never
admission or the engine.
"""

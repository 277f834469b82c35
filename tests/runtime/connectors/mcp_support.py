"""Set-up for the tests of connectors over MCP: a workspace with a pinned upstream server and a
skill whose connector calls it, and the fixture that ends each workspace's servers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from proctor.runtime.boundary.workspace import Workspace
from proctor.runtime.gateway.review import pin_servers
from proctor.runtime.gateway.upstreams import Upstreams, load_upstreams, shared_upstreams
from tests.runtime.driver_support import make_skill
from tests.runtime.gateway.support import make_workspace

Held = list[tuple[Path, dict[str, str]]]


@pytest.fixture
def roots() -> Iterator[Held]:
    """The workspaces a test made (with their environments): their servers end after it."""
    held: Held = []
    yield held
    for root, environ in held:
        found = shared_upstreams(Workspace(root), environ)
        if found is not None:
            found.close()


def pin(root: Path, environ: dict[str, str], *servers: str) -> None:
    """Pin every tool ``servers`` list now (as ``proctor mcp pin`` does)."""
    config = load_upstreams(root, environ)
    assert config is not None
    upstreams = Upstreams(config, Workspace.discover(root), environ)
    try:
        pin_servers(upstreams, list(servers))
    finally:
        upstreams.close()


def connector_workspace(
    tmp_path: Path,
    held: Held,
    servers: dict[str, Any],
    skill: tuple[str, str],
    connector: tuple[str, str],
    toml: str = "",
    environ: dict[str, str] | None = None,
) -> tuple[Path, dict[str, str]]:
    """A workspace at ``tmp_path/ws`` with ``servers`` in ``.mcp.json`` (pinned), the skill
    ``(name, run.yaml)`` and its connector ``(name, connector.yaml)``."""
    root = tmp_path / "ws"
    make_workspace(root, servers, toml)
    folder = make_skill(root, skill[0], skill[1])
    (folder / "connectors" / connector[0]).mkdir(parents=True)
    (folder / "connectors" / connector[0] / "connector.yaml").write_text(connector[1])
    env = {**os.environ, **(environ or {}), "PROCTOR_HOME": str(tmp_path / "home")}
    pin(root, env, *servers)
    held.append((root, env))
    return root, env

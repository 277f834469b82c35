"""``proctor mcp`` in a repository whose guard module no one trusted never imports it.

The guard writes a marker file when imported: its absence proves the module never ran.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.mcp.conftest import Ws, recorder_for, stdio_params

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

GUARD = """\
import pathlib
pathlib.Path({marker!r}).write_text("imported")
from proctor.policy import register_guard
register_guard("team_guard")(lambda ctx: None)
"""


async def _call(ws: Ws, env: dict[str, str]) -> Any:
    from mcp import Client

    recorder = recorder_for(stdio_params(ws, "hello-world", env=env))
    with anyio.fail_after(60):
        async with Client(recorder) as client:
            return await client.call_tool("hello-world__greet", {"message": "hi"})


def test_a_served_skill_never_imports_an_untrusted_guard(ws: Ws, tmp_path: Path) -> None:
    ws.add_example("hello-world")
    marker = tmp_path / "marker"
    (ws.root / "proctor.toml").write_text('[policy]\nguards = "guards.py"\n')
    (ws.root / "guards.py").write_text(GUARD.format(marker=str(marker)))
    refused = anyio.run(lambda: _call(ws, {}))
    assert refused.is_error is True
    assert "guards_untrusted" in json.dumps(refused.structured_content)
    assert not marker.exists()
    trusted = anyio.run(lambda: _call(ws, {"PROCTOR_TRUST_WORKSPACE": "1"}))
    assert trusted.is_error is False
    assert marker.exists()
    assert any(e["event"] == "guards_trusted_by_environment" for e in ws.audit())

"""Tool names, the served catalog, and that ``proctor --help`` never imports the SDK."""

from __future__ import annotations

import subprocess
import sys

import pytest

from proctor.errors import UsageError
from proctor.mcp import load_catalog, tool_name
from tests.mcp.conftest import REPO, Ws


def test_tool_names_fold_to_the_characters_every_client_accepts() -> None:
    assert tool_name("hello-world", "greet") == "hello-world__greet"
    assert tool_name("my skill", "do.it") == "my_skill__do_it"
    with pytest.raises(UsageError) as refused:
        tool_name("x" * 70, "m")
    assert refused.value.code == "mcp_tool_name_invalid"
    with pytest.raises(UsageError):
        tool_name("...", "m")


def test_a_name_collision_refuses_to_serve(ws: Ws) -> None:
    ws.add_example("hello-world")
    with pytest.raises(UsageError) as refused:
        load_catalog(
            ["hello-world", "hello-world#greet"], cwd=ws.root, workspace_root=ws.root, environ={}
        )
    assert refused.value.code == "mcp_tool_name_collision"


def test_a_method_reference_serves_that_method_alone(ws: Ws) -> None:
    ws.add_example("notes-editor")
    catalog = load_catalog(["notes-editor#edit"], cwd=ws.root, workspace_root=ws.root, environ={})
    assert list(catalog.tools) == ["notes-editor__edit"]
    tool = catalog.tools["notes-editor__edit"]
    assert tool.input_schema["required"] == ["file", "old", "new"]
    assert tool.credentials == ()


def test_help_does_not_import_the_mcp_sdk() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "proctor", "--help"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0
    loaded = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()]
    assert "proctor.cli.main" in loaded
    assert not [m for m in loaded if m.split(".")[0] in ("mcp", "mcp_types", "uvicorn")]


def test_a_core_skill_is_served_by_its_name(ws: Ws) -> None:
    env = {"PROCTOR_HOME": str(ws.root / ".home")}
    catalog = load_catalog(["proctor/receipt-audit"], cwd=ws.root, workspace_root=ws.root,
                           environ=env)  # fmt: skip
    tool = catalog.tools["receipt-audit__audit"]
    # run by name, so each call verifies the home's copy again and its receipt binds it
    assert tool.ref == "proctor/receipt-audit#audit"
    assert tool.input_schema["required"] == ["receipt"]

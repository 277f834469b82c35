"""``proctor mcp`` drops its own secret from the environment once read, so no process it
starts can inherit ``PROCTOR_MCP_API_KEY``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from proctor.cli.main import cli

KEY = "k" * 32


@pytest.mark.parametrize(
    "args",
    [
        # read and checked, then the server cannot open (no skill named): the key is gone
        ["mcp", "--transport", "http", "--port", "0"],
        # refused after the read (an unusable public URL): gone too
        ["mcp", "x", "--transport", "http", "--public-url", "ftp://nowhere"],
        # stdio never needs it: dropped all the same
        ["mcp"],
    ],
)
def test_the_api_key_leaves_the_environment_once_read(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PROCTOR_MCP_API_KEY", KEY)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0  # nothing was served
    assert "PROCTOR_MCP_API_KEY" not in os.environ
    assert KEY not in result.output

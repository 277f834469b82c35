"""``proctor tool list`` and ``proctor tool inspect``, through the real console entry point."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def proctor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args], capture_output=True, text=True, timeout=60
    )


def test_list_json_names_every_tool_with_its_effect() -> None:
    done = proctor("tool", "list", "--json")
    assert done.returncode == 0, done.stderr
    tools = {t["name"]: t["effect"] for t in json.loads(done.stdout)["tools"]}
    # Other tool families (network, process) register here too; these must all be present.
    assert (
        tools.items()
        >= {
            "echo": "none",
            "data.digest": "none",
            "fs.read": "read",
            "fs.list": "read",
            "fs.search": "read",
            "fs.write": "write",
            "fs.edit": "write",
            "fs.apply_bundle": "write",
            "fs.delete": "write",
            "fs.restore": "write",
            "http.request": "network",
        }.items()
    )


def test_list_human() -> None:
    done = proctor("tool", "list")
    assert done.returncode == 0
    assert "fs.apply_bundle" in done.stdout and "write" in done.stdout


def test_inspect_json() -> None:
    done = proctor("tool", "inspect", "fs.write", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["name"] == "fs.write" and doc["effect"] == "write"
    assert doc["input_schema"]["additionalProperties"] is False
    assert doc["input_schema"]["required"] == ["path", "content"]
    assert doc["output_schema"]["required"] == ["path", "content_digest", "previous_digest"]


def test_inspect_human() -> None:
    done = proctor("tool", "inspect", "echo")
    assert done.returncode == 0
    assert "input schema" in done.stdout


@pytest.mark.parametrize("args", [("inspect", "fs.nope"), ("inspect", "fs.nope", "--json")])
def test_unknown_tool_is_a_usage_error(args: tuple[str, ...]) -> None:
    done = proctor("tool", *args)
    assert done.returncode == 2
    assert "unknown_tool" in done.stderr and "fs.read" in done.stderr
    if "--json" in args:  # a program reads the error as a proctor.error.v1 object
        assert json.loads(done.stdout)["code"] == "unknown_tool"
    else:
        assert done.stdout == ""

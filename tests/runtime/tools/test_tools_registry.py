"""Every native tool: a strict schema, an effect class, a path extractor, a working handler."""

from __future__ import annotations

import hashlib
from typing import Any

import fastjsonschema
import pytest

from proctor.errors import RefusedCall
from proctor.receipts.canonical import digest
from proctor.runtime.tools.base import CHANGING_EFFECTS
from proctor.runtime.tools.registry import native_tools
from tests.runtime.tools.test_fs_support import Env
from tests.runtime.tools.test_fs_support import env as env  # fixture re-export

FS_TOOLS = {
    "fs.read",
    "fs.list",
    "fs.search",
    "fs.write",
    "fs.edit",
    "fs.apply_bundle",
    "fs.delete",
    "fs.restore",
}


def walk_objects(schema: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            found.append(schema)
        for value in schema.values():
            found += walk_objects(value)
    elif isinstance(schema, list):
        for value in schema:
            found += walk_objects(value)
    return found


def bounded(schema: Any) -> bool:
    """Every string has a maxLength and every array a maxItems (``value`` of data.digest aside)."""
    if isinstance(schema, dict):
        if schema.get("type") == "string" and not {"maxLength", "pattern", "enum"} & set(schema):
            return False
        if schema.get("type") == "array" and "maxItems" not in schema:
            return False
        return all(bounded(v) for v in schema.values())
    if isinstance(schema, list):
        return all(bounded(v) for v in schema)
    return True


@pytest.mark.parametrize("name", sorted(native_tools()))
def test_every_tool_has_a_strict_bounded_schema(name: str) -> None:
    tool = native_tools()[name]
    assert tool.name == name
    fastjsonschema.compile(tool.schema)
    assert tool.output_schema is not None
    fastjsonschema.compile(tool.output_schema)
    for obj in walk_objects(tool.schema):
        extra = obj.get("additionalProperties")
        # Closed objects, or bounded maps whose values have a schema; never open-ended.
        assert extra is False or (isinstance(extra, dict) and "maxProperties" in obj), name
    assert tool.schema["type"] == "object"
    assert bounded(tool.schema), name
    assert tool.effect in {"none", "read", "write", "network", "process"}
    if name.startswith("fs.") and name not in {"fs.read", "fs.read_bundle", "fs.list", "fs.search"}:
        assert tool.effect in CHANGING_EFFECTS


def test_registry_is_cached_but_each_caller_gets_its_own_dict() -> None:
    first, second = native_tools(), native_tools()
    assert first is not second
    assert first["echo"] is second["echo"]
    first.pop("echo")
    assert "echo" in native_tools()


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("fs.read", {"path": "a"}, [("a", "read")]),
        ("fs.list", {}, [(".", "list")]),
        ("fs.search", {"pattern": "x", "path": "src"}, [("src", "list")]),
        ("fs.write", {"path": "a", "content": ""}, [("a", "write")]),
        ("fs.edit", {"path": "a", "edits": []}, [("a", "write")]),
        ("fs.delete", {"path": "a"}, [("a", "write")]),
        ("fs.restore", {"trash_id": "x"}, []),
        (
            "fs.apply_bundle",
            {"changes": [{"op": "create", "path": "a"}, {"op": "delete", "path": "b"}]},
            [("a", "write"), ("b", "write")],
        ),
        ("echo", {"text": "x"}, []),
    ],
)
def test_path_extractors(name: str, args: dict[str, Any], expected: list[Any]) -> None:
    assert native_tools()[name].paths(args) == expected


def test_path_extractors_never_drop_a_malformed_path() -> None:
    # A non-string path still yields an entry (""), which containment refuses: fail closed.
    assert native_tools()["fs.read"].paths({"path": 3}) == [("", "read")]
    assert native_tools()["fs.apply_bundle"].paths({"changes": [{"path": None}]}) == [("", "write")]


def test_echo_and_digest(env: Env) -> None:
    assert env.call("echo", {"text": "hi"}) == {"text": "hi"}
    value = {"b": [1, "é", None], "a": True}
    got = env.call("data.digest", {"value": value})
    assert got == {"digest": digest(value)}
    assert got["digest"] == digest({"a": True, "b": [1, "é", None]})
    # utf8_text (the runx reference's encoding): the digest of the text's own bytes
    text = env.call("data.digest", {"value": "héllo", "encoding": "utf8_text"})
    assert text == {"digest": "sha256:" + hashlib.sha256("héllo".encode()).hexdigest()}
    assert env.call("data.digest", {"value": "x", "encoding": "canonical_json"}) == {
        "digest": digest("x")
    }


@pytest.mark.parametrize(
    "args", [{"value": 3, "encoding": "utf8_text"}, {"value": "x", "encoding": "latin1"}]
)
def test_digest_refuses_what_its_encoding_cannot_hash(env: Env, args: dict[str, Any]) -> None:
    with pytest.raises(RefusedCall) as caught:
        env.call("data.digest", args)
    assert caught.value.code == "schema_invalid"


def test_fs_tools_are_all_registered() -> None:
    assert set(native_tools()) >= FS_TOOLS


def test_the_name_table_is_what_the_providers_build() -> None:
    from proctor.runtime.tools import registry

    built: dict[str, str] = {}
    for provider in dict.fromkeys(registry._PROVIDED.values()):
        for tool in provider():
            assert tool.name not in built, f"{tool.name} built twice"
            built[tool.name] = provider.__name__
    assert built == {name: p.__name__ for name, p in registry._PROVIDED.items()}
    assert list(native_tools()) == list(registry.NATIVE_TOOL_NAMES)


def test_a_table_loads_only_what_is_read_and_is_its_callers_own() -> None:
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from proctor.runtime.tools.registry import native_tools\n"
        "t = native_tools(); names = list(t); assert 'http.request' in t and len(t) == len(names)\n"
        "assert t['echo'].name == 'echo' and t.get('nope') is None\n"
        "heavy = [m for m in ('proctor.runtime.tools.http', 'proctor.runtime.boundary.egress',"
        " 'proctor.runtime.tools.git', 'proctor.runtime.tools.procs') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "u = t.copy(); del u['echo']; u['x'] = t['echo']\n"
        "assert 'echo' in t and 'x' not in t and 'echo' in native_tools()\n"
        "assert t['http.request'].effect == 'network'\n"
        "assert 'proctor.runtime.tools.http' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

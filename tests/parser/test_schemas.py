"""Declared JSON Schemas are checked when run.yaml is read, against the draft-07 meta-schema.

The crash this closes: ``properties:`` left empty (null) in a method's input schema reached
fastjsonschema's code generator at the first validation, an AttributeError in the middle of
``proctor run`` that left the run ``running`` for good, while ``proctor check`` passed. Now it is
a ``schema_invalid`` parse error naming the line, before any run exists, and ``proctor check``
fails on it.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from proctor.errors import ParseError
from proctor.parser.schemas import META_SCHEMA, compile_schema
from proctor.parser.skill import parse_run_yaml

REPO = Path(__file__).resolve().parents[2]


def _profile(inputs: str, output: str = "{type: object}") -> str:
    return f"""minimum_proctor: 0.1.0
methods:
  main:
    inputs:
{inputs}
    steps:
      - id: a
        tool: echo
        inputs: {{text: hi}}
      - id: b
        agent:
          instructions: go
          output: {output}
"""


@pytest.mark.parametrize(
    ("inputs", "output", "path"),
    [
        ("      type: object\n      properties:", "{type: object}", "methods.main.inputs"),
        ("      type: object\n      required: name", "{type: object}", "methods.main.inputs"),
        ("      type: strin", "{type: object}", "methods.main.inputs"),
        ("      properties: {a: 5}", "{type: object}", "methods.main.inputs"),
        ("      properties: {a: {pattern: '('}}", "{type: object}", "methods.main.inputs"),
        ("      type: object", "{properties: []}", "methods.main.steps[1].agent.output"),
    ],
)
def test_a_malformed_schema_is_a_parse_error_where_it_is_written(
    inputs: str, output: str, path: str
) -> None:
    with pytest.raises(ParseError) as refused:
        parse_run_yaml(_profile(inputs, output), "skills/s/run.yaml")
    assert refused.value.code == "schema_invalid"
    assert refused.value.message.startswith("skills/s/run.yaml:")
    assert f"{path} is not a valid JSON Schema" in refused.value.message


def test_the_meta_schema_is_draft_07s_own() -> None:
    import jsonschema

    published = dict(jsonschema.Draft7Validator.META_SCHEMA)
    for key in ("$schema", "$id"):
        published.pop(key)

    def strip_uri_formats(node: object) -> object:
        if isinstance(node, dict):
            return {
                k: strip_uri_formats(v)
                for k, v in node.items()
                if not (k == "format" and v in ("uri", "uri-reference"))
            }
        if isinstance(node, list):
            return [strip_uri_formats(v) for v in node]
        return node

    assert json.loads(json.dumps(META_SCHEMA)) == strip_uri_formats(published)


def test_a_valid_schema_compiles_and_is_not_changed() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    before = json.dumps(schema)
    compile_schema(schema)({"a": "x"})
    assert json.dumps(schema) == before  # the meta-schema's defaults are not written into it


def test_run_refuses_before_any_run_exists_and_check_fails(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / ".proctor").mkdir(parents=True)
    folder = root / "skills" / "s"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: s\ndescription: d\n---\nbody\n")
    (folder / "run.yaml").write_text(_profile("      type: object\n      properties:"))
    env = {"PROCTOR_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO / "src")}

    def proctor(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "proctor", *args],
            cwd=root, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    ran = proctor("run", "s", "--json")
    assert "Traceback" not in ran.stderr
    assert ran.returncode == 2
    assert "schema_invalid" in ran.stdout + ran.stderr
    store = root / ".proctor" / "runs.sqlite"
    if store.exists():
        with sqlite3.connect(store) as conn:
            assert conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    checked = proctor("check")
    assert checked.returncode != 0
    assert "schema_invalid" in checked.stdout


def test_the_shipped_meta_validator_is_what_fastjsonschema_generates() -> None:
    import fastjsonschema

    from proctor.parser import _draft07_meta
    from proctor.parser.schemas import meta_module_source

    shipped = Path(_draft07_meta.__file__).read_text(encoding="utf-8")
    assert _draft07_meta.VERSION == fastjsonschema.VERSION, (
        "fastjsonschema changed: regenerate src/proctor/parser/_draft07_meta.py with"
        " proctor.parser.schemas.meta_module_source()"
    )
    assert shipped == meta_module_source()


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"properties": {"a": {"$ref": "http://127.0.0.1:{port}/s.json"}}}, "properties.a.$ref"),
        ({"items": [{"$ref": "file:///etc/passwd"}]}, "items.0.$ref"),
        ({"$id": "http://127.0.0.1:{port}/", "properties": {"a": {"$ref": "#/x"}}}, "$id"),
    ],
)
def test_a_schema_that_reaches_outside_itself_is_refused_and_nothing_is_fetched(
    schema: dict[str, object], where: str
) -> None:
    import http.server
    import threading

    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"type": "string"}')

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        text = json.dumps(schema).replace("{port}", str(server.server_address[1]))
        with pytest.raises(ParseError) as refused:
            compile_schema(json.loads(text))
        assert refused.value.code == "schema_invalid"
        assert refused.value.details["path"] == where
    finally:
        server.shutdown()
        server.server_close()
    assert hits == []  # nothing was fetched
    assert (
        compile_schema({"definitions": {"x": {"type": "string"}}, "$ref": "#/definitions/x"})("ok")
        == "ok"
    )  # a reference inside the schema still resolves


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"$ref": "#"}, ""),
        (
            {"definitions": {"a": {"$ref": "#/definitions/a"}}, "$ref": "#/definitions/a"},
            "definitions.a",
        ),
        (
            {
                "definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"allOf": [{"$ref": "#"}]}},
                "$ref": "#/definitions/a",
            },
            "definitions.b.allOf.0",
        ),
        ({"anyOf": [{"type": "string"}, {"$ref": "#"}]}, "anyOf.1"),
        ({"properties": {"x": {"not": {"$ref": "#/properties/x"}}}}, "properties.x.not"),
        ({"dependencies": {"a": {"if": {"$ref": "#"}}}}, "dependencies.a.if"),
    ],
)
def test_a_reference_loop_on_the_same_value_is_refused_where_it_is_declared(
    schema: dict[str, object], where: str
) -> None:
    # Each of these compiled, and the validator then recursed until Python's stack ran out
    # on the first value it checked (a RecursionError in the middle of a run).
    with pytest.raises(ParseError) as refused:
        compile_schema(schema)
    assert refused.value.code == "schema_invalid"
    assert "leads back to itself" in refused.value.message
    assert refused.value.details["path"] == where


def test_a_loop_on_the_same_value_in_run_yaml_is_refused_before_any_run() -> None:
    inputs = "      definitions: {a: {$ref: '#/definitions/a'}}\n      $ref: '#/definitions/a'"
    with pytest.raises(ParseError) as refused:
        parse_run_yaml(_profile(inputs), "skills/s/run.yaml")
    assert refused.value.code == "schema_invalid"
    assert "methods.main.inputs is not a valid JSON Schema" in refused.value.message


def test_a_reference_that_descends_into_the_value_still_recurses() -> None:
    tree = {
        "definitions": {
            "node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/definitions/node"}}},
                "additionalProperties": {"$ref": "#"},
            }
        },
        "$ref": "#/definitions/node",
    }
    value: dict[str, object] = {"kids": []}
    for _ in range(30):
        value = {"kids": [value], "other": {"kids": []}}
    assert compile_schema(tree)(value) == value
    chained = {"properties": {"next": {"$ref": "#"}}, "allOf": [{"type": "object"}]}
    assert compile_schema(chained)({"next": {"next": {}}}) == {"next": {"next": {}}}


def test_run_yaml_checks_each_new_schema_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The checks (the loop walk and the meta-schema) ran twice per new schema: once to say
    # where a problem is, again inside the compile that followed.
    from proctor.parser import schemas

    walked: list[object] = []
    real = schemas._reference_loop

    def counted(schema: object) -> tuple[str | int, ...] | None:
        walked.append(schema)
        return real(schema)

    monkeypatch.setattr(schemas, "_reference_loop", counted)
    fresh = "      type: object\n      properties: {once_only_marker: {type: string}}"
    parse_run_yaml(_profile(fresh), "skills/s/run.yaml")
    assert sum("once_only_marker" in json.dumps(s) for s in walked) == 1

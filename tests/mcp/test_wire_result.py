"""A call's result built as its wire form is what the SDK's model dumps, and the SDK's pipeline
takes it; the SDK's tracing span is left out only when no tracer provider is installed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp_types import methods

from proctor.contracts.envelope import Refusal, RunEnvelope, TraceEntry
from proctor.mcp.shared import run_content, tool_result

SEALED = RunEnvelope(
    status="sealed",
    outcome="completed",
    run_id="r1",
    receipt_id="sha256:ab",
    skill="hello-world",
    method="greet",
    result={"greet": {"text": 'héllo "you"'}, "n": [1, 2.5, None, True]},
    trace=[TraceEntry(step="greet", tool="echo", call_id="greet/1", outcome="completed")],
    notes=["a note"],
).to_json()
FAILED = {
    **SEALED,
    "outcome": "failed",
    "result": None,
    "refusal": Refusal(code="step_failed", message="it broke").model_dump(),
}
PAUSED = RunEnvelope(
    status="needs_approval",
    run_id="r2",
    skill="s",
    method="m",
    requests=[{"address": "a", "kind": "approval", "request_digest": "sha256:cd"}],
).to_json()


def _model_dump(doc: dict[str, Any]) -> dict[str, Any]:
    model = types.CallToolResult(
        content=run_content(doc),
        structured_content=doc,
        is_error=doc.get("outcome") in ("failed", "blocked", "killed"),
    )
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


@pytest.mark.parametrize("doc", [SEALED, FAILED, PAUSED, {**SEALED, "outcome": "killed"}])
def test_the_wire_form_is_the_models_dump(doc: dict[str, Any]) -> None:
    assert tool_result(doc) == _model_dump(doc)


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", "2026-07-28"])
def test_the_sdk_takes_the_wire_form_as_it_takes_the_models(version: str) -> None:
    ours = methods.serialize_server_result("tools/call", version, tool_result(FAILED))
    theirs = methods.serialize_server_result("tools/call", version, _model_dump(FAILED))
    assert ours == theirs
    assert ours["isError"] is True and ours["structuredContent"] == FAILED


def _built(tmp_path: Path) -> Any:
    from proctor.mcp.catalog import Catalog
    from proctor.mcp.server import ProctorServer
    from proctor.mcp.shared import ServerConfig
    from proctor.runtime.boundary.workspace import Workspace

    (tmp_path / ".proctor").mkdir()
    environ = {"PROCTOR_HOME": str(tmp_path / "home")}
    config = ServerConfig(workspace=Workspace(tmp_path), catalog=Catalog(), environ=environ)
    return ProctorServer(config)


def test_without_a_tracer_provider_the_sdks_span_middleware_is_left_out(tmp_path: Path) -> None:
    from mcp.server._otel import OpenTelemetryMiddleware

    from proctor.mcp.server import tracing_configured

    assert not tracing_configured()  # the tests install none
    proctor = _built(tmp_path)
    try:
        server = proctor.build()
        assert not any(isinstance(m, OpenTelemetryMiddleware) for m in server.middleware)
        assert server.get_request_handler("tools/call") is not None
    finally:
        proctor.close()


def test_with_a_tracer_provider_the_sdks_span_middleware_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp.server._otel import OpenTelemetryMiddleware
    from opentelemetry import trace

    class Provider(trace.TracerProvider):
        def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
            return trace.NoOpTracer()

    monkeypatch.setattr(trace, "get_tracer_provider", lambda: Provider())
    proctor = _built(tmp_path)
    try:
        server = proctor.build()
        assert isinstance(server.middleware[0], OpenTelemetryMiddleware)
    finally:
        proctor.close()


def test_a_served_workspace_reads_the_environment_it_started_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import shutil

    from proctor.mcp.app import open_server
    from proctor.runtime.boundary.workspace import Workspace

    repo = Path(__file__).resolve().parents[2]
    (tmp_path / ".proctor").mkdir()
    shutil.copytree(repo / "examples" / "hello-world", tmp_path / "skills" / "hello-world")
    monkeypatch.setenv("PROCTOR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PROCTOR_TEST_SNAPSHOT", "before")
    proctor = open_server(["hello-world"], workspace=Workspace(tmp_path), cwd=tmp_path)
    try:
        monkeypatch.setenv("PROCTOR_TEST_SNAPSHOT", "after")
        environ = proctor.config.environ
        assert type(environ) is dict and environ is not os.environ
        assert environ["PROCTOR_TEST_SNAPSHOT"] == "before"
    finally:
        proctor.close()

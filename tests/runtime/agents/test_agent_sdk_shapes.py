"""The official SDKs read the stub model servers' answers: the stubs speak the real wire shapes.

proctor speaks the providers' HTTP shapes with httpx itself; these tests point the ``openai``
and ``anthropic`` SDKs at the same loopback stubs the agent tests use, so a stub that drifted
from what a provider sends would fail here. They also check that what proctor sends is what the
SDKs send for the same request (paths and the fields each API requires).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.runtime.agent_stub import StubModel, answer, error

openai = pytest.importorskip("openai", reason="the openai SDK is a dev extra")
anthropic = pytest.importorskip("anthropic", reason="the anthropic SDK is a dev extra")

TOOL = {
    "name": "fs_read",
    "description": "Read a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}


def test_chat_completions_stub_is_read_by_the_openai_sdk() -> None:
    script = [answer("chat_completions", calls=[("fs_read", {"path": "a.txt"})])]
    with StubModel(script) as stub:
        client = openai.OpenAI(base_url=stub.url, api_key="k", max_retries=0)
        completion = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": TOOL}],
        )
        client.close()
    call = completion.choices[0].message.tool_calls[0]
    assert call.function.name == "fs_read"
    assert json.loads(call.function.arguments) == {"path": "a.txt"}
    assert stub.seen[0].path == "/v1/chat/completions"


def test_responses_stub_is_read_by_the_openai_sdk() -> None:
    script = [
        answer("openai_responses", text="hello", calls=[("fs_read", {"path": "a.txt"})]),
    ]
    with StubModel(script) as stub:
        client = openai.OpenAI(base_url=stub.url, api_key="k", max_retries=0)
        response = client.responses.create(
            model="m", input="hi", tools=[{"type": "function", **TOOL}]
        )
        client.close()
    assert response.output_text == "hello"
    calls = [item for item in response.output if item.type == "function_call"]
    assert calls[0].name == "fs_read"
    assert json.loads(calls[0].arguments) == {"path": "a.txt"}
    assert stub.seen[0].path == "/v1/responses"


def test_messages_stub_is_read_by_the_anthropic_sdk() -> None:
    script = [answer("anthropic_messages", text="ok", calls=[("fs_read", {"path": "a.txt"})])]
    with StubModel(script) as stub:
        client = anthropic.Anthropic(base_url=stub.base, api_key="k", max_retries=0)
        message = client.messages.create(
            model="m",
            max_tokens=64,
            messages=[{"role": "user", "content": "hi"}],
            tools=[{"name": "fs_read", "description": "d", "input_schema": TOOL["parameters"]}],
        )
        client.close()
    blocks = {block.type: block for block in message.content}
    assert blocks["text"].text == "ok"
    assert blocks["tool_use"].name == "fs_read"
    assert blocks["tool_use"].input == {"path": "a.txt"}
    seen = stub.seen[0]
    assert seen.path == "/v1/messages"
    assert "anthropic-version" in seen.headers


@pytest.mark.parametrize(
    ("dialect", "make"),
    [
        ("chat_completions", lambda url: openai.OpenAI(base_url=url, api_key="k", max_retries=0)),
        ("anthropic_messages", None),
    ],
)
def test_error_stubs_are_read_by_the_sdks_as_provider_errors(dialect: str, make: Any) -> None:
    with StubModel([error(dialect, 429, "slow down")]) as stub:
        if dialect == "anthropic_messages":
            client = anthropic.Anthropic(base_url=stub.base, api_key="k", max_retries=0)
            with pytest.raises(anthropic.RateLimitError) as caught:
                client.messages.create(
                    model="m", max_tokens=8, messages=[{"role": "user", "content": "x"}]
                )
        else:
            client = make(stub.url)
            with pytest.raises(openai.RateLimitError) as caught:
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "x"}]
                )
        client.close()
    assert "slow down" in str(caught.value)

"""The chat completions dialect (``POST {endpoint}/chat/completions``).

Spoken by OpenAI's chat completions API and by most local OpenAI-compatible servers (Ollama,
llama.cpp's server, vLLM). Tools are ``{"type": "function", "function": {...}}``; the model's
calls arrive in ``choices[0].message.tool_calls`` with ``arguments`` as a JSON text; each result
goes back as a ``{"role": "tool", "tool_call_id": ...}`` message.
"""

from __future__ import annotations

from typing import Any

from proctor.runtime.agents.wire import (
    MalformedReply,
    ModelReply,
    ToolRequest,
    ToolSpec,
    openai_error_message,
    tool_request,
)

__all__ = ["ChatCompletions"]


class ChatCompletions:
    """One conversation in the chat completions format."""

    path = "/chat/completions"

    def __init__(self, model: str, *, max_tokens: int | None = None) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []

    def headers(self, key: str | None) -> dict[str, str]:
        return {} if key is None else {"Authorization": f"Bearer {key}"}

    def begin(self, system: str, user: str, tools: list[ToolSpec]) -> None:
        self.messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        self.tools = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in tools
        ]

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": self.messages}
        if self.tools:
            body["tools"] = self.tools
            body["tool_choice"] = "auto"
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    def read(self, document: Any) -> ModelReply:
        try:
            message = document["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError
            content = message.get("content")
            calls = message.get("tool_calls") or []
            if content is not None and not isinstance(content, str):
                raise TypeError
            if not isinstance(calls, list):
                raise TypeError
            requests = []
            for call in calls:
                function = call["function"]
                requests.append(
                    tool_request(call["id"], function["name"], function.get("arguments"))
                )
        except (KeyError, IndexError, TypeError) as exc:
            raise MalformedReply(
                "the model provider's answer is not a chat completion (no choices[0].message)"
            ) from exc
        echo: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            echo["tool_calls"] = calls
        return ModelReply(text=content or "", tool_requests=requests, echo=echo)

    def add_reply(self, reply: ModelReply) -> None:
        self.messages.append(reply.echo)

    def add_results(self, results: list[tuple[ToolRequest, str]]) -> None:
        for request, content in results:
            self.messages.append({"role": "tool", "tool_call_id": request.id, "content": content})

    def add_user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    @staticmethod
    def error_message(document: Any) -> str | None:
        return openai_error_message(document)

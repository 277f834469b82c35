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
        """Decode a chat completion; ``content`` may be text, ``null`` or a list of parts.

        A call without an ``id`` gets one (``call_<n>``) so its result can be answered; the
        echo always carries ``content`` as text (``""``, never ``null``: llama.cpp's server
        refuses a ``null`` content with a 500).
        """
        try:
            message = document["choices"][0]["message"]
            if not isinstance(message, dict):
                raise TypeError
            content = _text_of(message.get("content"))
            calls = message.get("tool_calls") or []
            if not isinstance(calls, list):
                raise TypeError
            requests = []
            echoed = []
            for index, call in enumerate(calls):
                function = call["function"]
                call_id = call.get("id")
                if not isinstance(call_id, str) or not call_id:
                    call_id = f"call_{len(self.messages)}_{index}"
                echoed.append({**call, "id": call_id, "type": call.get("type") or "function"})
                requests.append(tool_request(call_id, function["name"], function.get("arguments")))
        except (KeyError, IndexError, TypeError) as exc:
            raise MalformedReply(
                "the model provider's answer is not a chat completion (no choices[0].message)"
            ) from exc
        echo: dict[str, Any] = {"role": "assistant", "content": content}
        if echoed:
            echo["tool_calls"] = echoed
        return ModelReply(text=content, tool_requests=requests, echo=echo)

    def add_reply(self, reply: ModelReply) -> None:
        self.messages.append(reply.echo)

    def add_results(self, results: list[tuple[ToolRequest, str]]) -> None:
        for request, content in results:
            self.messages.append({"role": "tool", "tool_call_id": request.id, "content": content})

    def add_user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def results(self) -> list[tuple[dict[str, Any], str]]:
        return [(m, "content") for m in self.messages if m.get("role") == "tool"]

    @staticmethod
    def error_message(document: Any) -> str | None:
        return openai_error_message(document)


def _text_of(content: Any) -> str:
    """A message's ``content`` as text: ``None`` is ``""``, a list of parts is their text.

    Raises:
        TypeError: it is neither text, ``null`` nor a list of parts.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "".join(texts)
    raise TypeError

"""The Messages dialect (``POST {endpoint}/messages``), Anthropic's API.

The key goes in ``x-api-key`` with an ``anthropic-version`` header. Tools are
``{"name", "description", "input_schema"}``; the model's calls arrive as ``tool_use`` content
blocks (``input`` already an object) and each result goes back in a user message as a
``tool_result`` block with the same ``tool_use_id``.
"""

from __future__ import annotations

from typing import Any

from proctor.runtime.agents.wire import (
    MalformedReply,
    ModelReply,
    ToolRequest,
    ToolSpec,
    tool_request,
)

__all__ = ["ANTHROPIC_VERSION", "AnthropicMessages"]

ANTHROPIC_VERSION = "2023-06-01"


class AnthropicMessages:
    """One conversation in the Messages format."""

    path = "/messages"

    def __init__(self, model: str, *, max_tokens: int | None = None) -> None:
        self.model = model
        # The Messages API requires max_tokens; 4096 fits every current model.
        self.max_tokens = max_tokens or 4096
        self.system = ""
        self.messages: list[dict[str, Any]] = []
        self.tools: list[dict[str, Any]] = []

    def headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if key is not None:
            headers["x-api-key"] = key
        return headers

    def begin(self, system: str, user: str, tools: list[ToolSpec]) -> None:
        self.system = system
        self.messages = [{"role": "user", "content": user}]
        self.tools = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools
        ]

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": self.system,
            "messages": self.messages,
        }
        if self.tools:
            body["tools"] = self.tools
        return body

    def read(self, document: Any) -> ModelReply:
        try:
            if document.get("type") != "message":
                raise TypeError
            content = document["content"]
            if not isinstance(content, list):
                raise TypeError
            texts: list[str] = []
            requests: list[ToolRequest] = []
            for block in content:
                kind = block["type"]
                if kind == "text":
                    texts.append(str(block["text"]))
                elif kind == "tool_use":
                    requests.append(tool_request(block["id"], block["name"], block.get("input")))
        except (KeyError, TypeError, AttributeError) as exc:
            raise MalformedReply(
                "the model provider's answer is not a Messages object (no content blocks)"
            ) from exc
        return ModelReply(
            text="".join(texts),
            tool_requests=requests,
            echo={"role": "assistant", "content": content},
        )

    def add_reply(self, reply: ModelReply) -> None:
        self.messages.append(reply.echo)

    def add_results(self, results: list[tuple[ToolRequest, str]]) -> None:
        blocks = [
            {"type": "tool_result", "tool_use_id": request.id, "content": content}
            for request, content in results
        ]
        self.messages.append({"role": "user", "content": blocks})

    def add_user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def results(self) -> list[tuple[dict[str, Any], str]]:
        return [
            (block, "content")
            for m in self.messages
            if m.get("role") == "user" and isinstance(m.get("content"), list)
            for block in m["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]

    @staticmethod
    def error_message(document: Any) -> str | None:
        if isinstance(document, dict):
            error = document.get("error")
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                return str(error["message"])
        return None
